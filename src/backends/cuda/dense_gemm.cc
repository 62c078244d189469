#include "backends/cuda/dense_gemm.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/kernels.h"

namespace anymoe::cuda {

void DenseGemm::Init(CudaDevice& dev, char* tile, char* workspace) {
  dev_ = &dev;
  tile_ = reinterpret_cast<float*>(tile);
  CheckCublas(cublasSetWorkspace(dev.blas(), workspace, kWorkspaceBytes), "cublasSetWorkspace");
}

void DenseGemm::Run(const float* x, int tokens, int k, const DeviceWeight& w, int n, float* y) {
  // Row-major y [T, n] is column-major y^T [n, T]: y^T = W (k x n col-major)^T . x^T.
  const float one = 1.0f, zero = 0.0f;
  if (w.dtype == kernels::kF32) {
    dev_->CountLaunch();  // each cuBLAS call counts as one launch
    CheckCublas(cublasSgemm(dev_->blas(), CUBLAS_OP_T, CUBLAS_OP_N, n, tokens, k, &one,
                            reinterpret_cast<const float*>(w.data), k, x, k, &zero, y, n),
                "cublasSgemm");
    return;
  }
  const int tile_rows = int(std::max<uint64_t>(1, kTileBytes / (uint64_t(k) * sizeof(float))));
  for (int r0 = 0; r0 < n; r0 += tile_rows) {
    const int rows = std::min(tile_rows, n - r0);
    kernels::Scales scales = w.scales;  // the tile's rows start r0 rows further
    scales.first_row += r0;
    kernels::DequantizeRows(w.data + w.row_bytes * uint64_t(r0), w.row_bytes, w.dtype, scales, rows,
                            k, tile_, kernels::Stream{dev_->compute(), dev_});
    // Output columns [r0, r0 + rows) of every token row: ldc stays n.
    dev_->CountLaunch();
    CheckCublas(cublasSgemm(dev_->blas(), CUBLAS_OP_T, CUBLAS_OP_N, rows, tokens, k, &one, tile_,
                            k, x, k, &zero, y + r0, n),
                "cublasSgemm (decoded tile)");
  }
}

}  // namespace anymoe::cuda
