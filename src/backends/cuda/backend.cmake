# The CUDA backend (option ANYMOE_CUDA), the plugin libanymoe-cuda.so. Kernels
# compiled by nvcc (kernels/*.cu); the host side (*.cc) by the C++ compiler
# against the CUDA runtime and cuBLAS, which only the plugin links.
if(ANYMOE_CUDA)
  anymoe_device_backend(cuda CudaBackendEntry)
  file(GLOB cu_files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda/kernels/*.cu)
  target_sources(anymoe_backend_cuda PRIVATE ${cu_files})
  target_link_libraries(anymoe_backend_cuda PRIVATE CUDA::cudart CUDA::cublas)
  # NCCL where the toolkit (or the system) has it: expert parallelism's
  # exchange between CUDA ranks then stays on the devices (nccl_exchange.cc);
  # without it the ranks exchange through host memory over MPI.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    target_include_directories(anymoe_backend_cuda PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(anymoe_backend_cuda PRIVATE ${NCCL_LIBRARY})
    target_compile_definitions(anymoe_backend_cuda PRIVATE ANYMOE_HAVE_NCCL)
    message(STATUS "CUDA backend: NCCL ${NCCL_LIBRARY}")
  else()
    message(STATUS "CUDA backend: no NCCL found (expert parallelism exchanges through host memory)")
  endif()
  target_compile_definitions(anymoe_backends PUBLIC ANYMOE_HAVE_CUDA)
endif()
