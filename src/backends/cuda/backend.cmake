# The CUDA backend (option ANYMOE_CUDA). Kernels compiled by nvcc
# (kernels/*.cu); the host side (*.cc) by the C++ compiler against the CUDA
# runtime and cuBLAS.
if(ANYMOE_CUDA)
  anymoe_device_backend(cuda RegisterCudaBackend)
  file(GLOB cu_files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda/kernels/*.cu)
  target_sources(anymoe_backends PRIVATE ${cu_files})
  target_link_libraries(anymoe_backends PUBLIC CUDA::cudart CUDA::cublas)
  target_compile_definitions(anymoe_backends PUBLIC ANYMOE_HAVE_CUDA)
endif()
