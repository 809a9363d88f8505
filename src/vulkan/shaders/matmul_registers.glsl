// The product every matmul_*_registers.comp shares, for CPU devices (lavapipe): y[M, N] (+)= x[M, K] · W[N, K]ᵀ,
// f32 x and y, f32 accumulation, with no shared memory and no barrier. llvmpipe runs a workgroup as subgroups
// of 8 lanes and switches between all of them at every barrier, which held matmul_tile.glsl to 0.15 GFLOP/s
// there; and it reads a storage buffer with a loop over the lanes, so what counts is how many reads an FMA
// costs. Each invocation keeps a 32 x 8 tile of y in registers (32 rows of x, 8 columns of W) and reads x and
// W straight from the buffers. Every invocation of a workgroup works on the same 32 rows, so x comes 8 values
// of K at a time, one a lane (lane l reads x[m, k + l]), and subgroupBroadcast hands each to the others: x is
// read once a subgroup instead of once a lane. Needs subgroups of at least 8 invocations with subgroupBroadcast
// in compute shaders (kChunk; vk::Ops checks).
//
// The including shader includes a weights_*.glsl after it, which declares the weight buffers (bindings 2..)
// and defines weight(n, k) = W[n, k] as f32 (n < N, k < K) and weights8(n, k, v): v[i] = W[n, k + i], i < 8
// (k a multiple of 8, k + 8 <= K), reading each word of W once. Ragged M and N: rows and columns past the edge
// are read clamped to the last one and not stored; K past the last multiple of 8 goes one step at a time.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require

const uint kRows = 32, kCols = 8, kChunk = 8;
layout(local_size_x = 16) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Params { uint M; uint N; uint K; uint accumulate; } p;

float weight(uint n, uint k);
void weights8(uint n, uint k, out float v[kChunk]);

// x[rows 4q .. 4q + 3 of the tile, k], xrow[i] the offset of row i.
vec4 x_rows(uint xrow[kRows], uint q, uint k) {
  return vec4(x[xrow[4 * q] + k], x[xrow[4 * q + 1] + k], x[xrow[4 * q + 2] + k], x[xrow[4 * q + 3] + k]);
}

void main() {
  const uint m0 = gl_WorkGroupID.y * kRows;  // the whole workgroup's rows: x is shared through its subgroups
  const uint n0 = gl_GlobalInvocationID.x * kCols;
  const uint lane = gl_SubgroupInvocationID % kChunk;
  // Clamped: an invocation past the edge still reads x for the others (and nothing past the buffers).
  uint xrow[kRows], wcol[kCols];
  [[unroll]] for (uint i = 0; i < kRows; ++i) xrow[i] = min(m0 + i, p.M - 1) * p.K;
  [[unroll]] for (uint j = 0; j < kCols; ++j) wcol[j] = min(n0 + j, p.N - 1);
  // Rows four to a vec4 (fewer, wider instructions for glslc to optimise; the same scalar FMAs on the device).
  vec4 acc[kCols][kRows / 4];  // acc[j][q][r]: y[m0 + 4q + r, n0 + j]
  [[unroll]] for (uint j = 0; j < kCols; ++j) {
    [[unroll]] for (uint q = 0; q < kRows / 4; ++q) acc[j][q] = vec4(0.0);
  }

  const uint k_whole = p.K - p.K % kChunk;
  for (uint k = 0; k < k_whole; k += kChunk) {
    vec4 xl[kRows / 4];  // xl[q][r]: x[m0 + 4q + r, k + lane]
    [[unroll]] for (uint q = 0; q < kRows / 4; ++q) xl[q] = x_rows(xrow, q, k + lane);
    float w[kCols][kChunk];
    [[unroll]] for (uint j = 0; j < kCols; ++j) weights8(wcol[j], k, w[j]);
    [[unroll]] for (uint kk = 0; kk < kChunk; ++kk) {
      [[unroll]] for (uint q = 0; q < kRows / 4; ++q) {
        const vec4 xv = subgroupBroadcast(xl[q], kk);  // x[m0 + 4q .. + 3, k + kk]
        [[unroll]] for (uint j = 0; j < kCols; ++j) acc[j][q] = fma(xv, vec4(w[j][kk]), acc[j][q]);
      }
    }
  }
  for (uint k = k_whole; k < p.K; ++k) {
    float w[kCols];
    [[unroll]] for (uint j = 0; j < kCols; ++j) w[j] = weight(wcol[j], k);
    [[unroll]] for (uint q = 0; q < kRows / 4; ++q) {
      const vec4 xv = x_rows(xrow, q, k);
      [[unroll]] for (uint j = 0; j < kCols; ++j) acc[j][q] = fma(xv, vec4(w[j]), acc[j][q]);
    }
  }

  [[unroll]] for (uint q = 0; q < kRows / 4; ++q) {
    [[unroll]] for (uint r = 0; r < 4; ++r) {
      [[unroll]] for (uint j = 0; j < kCols; ++j) {
        const uint m = m0 + 4 * q + r, n = n0 + j;
        if (m < p.M && n < p.N) {
          const uint o = m * p.N + n;
          y[o] = p.accumulate != 0 ? y[o] + acc[j][q][r] : acc[j][q][r];
        }
      }
    }
  }
}
