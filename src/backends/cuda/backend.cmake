# The CUDA backend (option ANYMOE_CUDA), the plugin libanymoe-cuda.so. Kernels
# compiled by nvcc (kernels/*.cu); the host side (*.cc) by the C++ compiler
# against the CUDA runtime and cuBLAS, which only the plugin links.
if(ANYMOE_CUDA)
  anymoe_device_backend(cuda CudaBackendEntry)
  file(GLOB cu_files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda/kernels/*.cu)
  target_sources(anymoe_backend_cuda PRIVATE ${cu_files})
  target_link_libraries(anymoe_backend_cuda PRIVATE CUDA::cudart CUDA::cublas)
  target_compile_definitions(anymoe_backends PUBLIC ANYMOE_HAVE_CUDA)
endif()
