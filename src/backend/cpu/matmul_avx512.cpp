// backend/cpu/matmul_avx512.cpp — the AVX-512 matmul kernel (contract in matmul.h).
// A tile computes RX rows × NW features with one zmm accumulator per output element; each w vector is
// converted once and used by RX rows, each x vector by NW features. The tile shape changes which loads
// are shared, never the order in which an output element is reduced.
#include "backend/cpu/matmul.h"
#include "backend/cpu/simd_avx512.h"

namespace helium::cpu::avx512 {

namespace {

// Tile shapes. One or two rows stream w with 8 features in flight (8 independent FMA chains hide the FMA
// latency); more rows use 4 × 4 tiles (16 accumulators + 4 x + 4 w vectors fit the 32 zmm registers;
// each widened w vector feeds 4 FMAs). Measured with bench/cpu, 64 rows, BF16, one thread, best of 3
// on an AMD EPYC (family 1Ah, 2 vCPUs): 4×4, 6×4, 8×3, 4×6 and 5×5 tiles all gave 140-148 GFLOP/s
// (about 75% of the 196 GFLOP/s FMA peak measured on the same core), within the machine's noise, so
// the smallest is kept. Software prefetch of the next tile of w (into L1 or L2) made no difference
// beyond noise for decode on this machine nor on a 16-vCPU Xeon, so there is none.
constexpr int kDecodeMaxRows = 2;
constexpr int kDecodeFeatures = 8;
constexpr int kTileRows = 4;
constexpr int kTileFeatures = 4;

struct Tile {
  const float* x;     // first row of the tile
  int64_t x_stride;   // elements between rows of x
  const uint8_t* w;   // first feature of the tile
  int64_t w_stride;   // bytes between rows of w
  float* y;           // y[first row][first feature]
  int64_t y_stride;   // elements between rows of y
  int64_t k;
};

template <class Load, int RX, int NW>
void tile_kernel(const Tile& t) {
  __m512 acc[RX][NW];
  for (int r = 0; r < RX; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t k_full = t.k / kLanes * kLanes;
  for (int64_t i = 0; i < k_full; i += kLanes) {
    __m512 wv[NW];
    for (int j = 0; j < NW; ++j) wv[j] = Load::load(t.w + j * t.w_stride, i);
    for (int r = 0; r < RX; ++r) {
      const __m512 xv = _mm512_loadu_ps(t.x + r * t.x_stride + i);
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  if (k_full < t.k) {
    const __mmask16 m = tail_mask(t.k - k_full);
    __m512 wv[NW];
    for (int j = 0; j < NW; ++j) wv[j] = Load::load_tail(t.w + j * t.w_stride, k_full, m);
    for (int r = 0; r < RX; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, t.x + r * t.x_stride + k_full);
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < RX; ++r)
    for (int j = 0; j < NW; ++j) t.y[r * t.y_stride + j] = hsum(acc[r][j]);
}

template <class Load, int RX>
void tile_rows(const Tile& t, int nw) {
  switch (nw) {
    case 1: return tile_kernel<Load, RX, 1>(t);
    case 2: return tile_kernel<Load, RX, 2>(t);
    case 3: return tile_kernel<Load, RX, 3>(t);
    case 4: return tile_kernel<Load, RX, 4>(t);
    case 5: return tile_kernel<Load, RX, 5>(t);
    case 6: return tile_kernel<Load, RX, 6>(t);
    case 7: return tile_kernel<Load, RX, 7>(t);
    default: return tile_kernel<Load, RX, 8>(t);
  }
}

template <class Load>
void tile_any(const Tile& t, int rx, int nw) {
  switch (rx) {
    case 1: return tile_rows<Load, 1>(t, nw);
    case 2: return tile_rows<Load, 2>(t, nw);
    case 3: return tile_rows<Load, 3>(t, nw);
    default: return tile_rows<Load, 4>(t, nw);
  }
}

template <class Load>
void matmul_typed(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end) {
  const int64_t w_stride = p.k * (p.w_dtype == DType::F32 ? 4 : 2);
  const int64_t rows = row_end - row_begin;
  // Few rows: stream w with more features per pass; many rows: square tiles that reuse w from L1.
  const int64_t features = rows <= kDecodeMaxRows ? kDecodeFeatures : kTileFeatures;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += features) {
    const int nw = static_cast<int>(n_end - n0 < features ? n_end - n0 : features);
    for (int64_t r = row_begin; r < row_end; r += kTileRows) {
      const int rx = static_cast<int>(row_end - r < kTileRows ? row_end - r : kTileRows);
      const Tile t{p.x + r * p.k, p.k, static_cast<const uint8_t*>(p.w) + n0 * w_stride, w_stride,
                   p.y + r * p.n + n0, p.n, p.k};
      tile_any<Load>(t, rx, nw);
    }
  }
}

}  // namespace

void matmul(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case DType::F16: return matmul_typed<LoadF16>(p, row_begin, row_end, n_begin, n_end);
    case DType::BF16: return matmul_typed<LoadBF16>(p, row_begin, row_end, n_begin, n_end);
    default: return matmul_typed<LoadF32>(p, row_begin, row_end, n_begin, n_end);
  }
}

}  // namespace helium::cpu::avx512
