# The OpenCL backend (option ANYMOE_OPENCL), the plugin libanymoe-opencl.so.
# Its kernels are OpenCL C sources embedded in the plugin and compiled when
# the backend is created.
if(ANYMOE_OPENCL)
  anymoe_device_backend(opencl OpenClBackendEntry)
  set(cl_dir ${CMAKE_CURRENT_SOURCE_DIR}/backends/opencl/kernels)
  file(GLOB cl_files CONFIGURE_DEPENDS ${cl_dir}/*.cl)
  set(cl_cc ${CMAKE_CURRENT_BINARY_DIR}/generated/opencl_kernels.cc)
  add_custom_command(
    OUTPUT ${cl_cc}
    COMMAND ${CMAKE_COMMAND} -DDIR=${cl_dir} -DOUTPUT=${cl_cc}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/backends/opencl/embed_kernels.cmake
    DEPENDS ${cl_files} ${CMAKE_CURRENT_SOURCE_DIR}/backends/opencl/embed_kernels.cmake
    COMMENT "Embedding OpenCL kernels")
  target_sources(anymoe_backend_opencl PRIVATE ${cl_cc})
  target_link_libraries(anymoe_backend_opencl PRIVATE OpenCL::OpenCL)
  target_compile_definitions(anymoe_backend_opencl PRIVATE CL_TARGET_OPENCL_VERSION=120)
  target_compile_definitions(anymoe_backends PUBLIC ANYMOE_HAVE_OPENCL)
endif()
