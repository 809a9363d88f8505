// The product every matmul_*.comp shares (GPUs): y[M, N] (+)= x[M, K] · W[N, K]ᵀ (W in PyTorch's layout), f32
// x and y, f32 accumulation; 16 x 16 output tiles, K in steps of 16 through shared memory. The plain path every
// Vulkan 1.1 GPU runs; faster paths choose themselves (CPU devices take matmul_registers.glsl: see vk::Ops).
// The including shader includes a weights_*.glsl after it, which declares the weight buffers (bindings 2..)
// and defines weight(n, k), W[n, k] as f32 (called with n < N, k < K).
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Params { uint M; uint N; uint K; uint accumulate; } p;

float weight(uint n, uint k);

shared float xs[16][17];  // +1: no bank conflicts on the column reads
shared float ws[16][17];

void main() {
  const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  const uint row = gl_WorkGroupID.y * 16 + ly;  // m
  const uint col = gl_WorkGroupID.x * 16 + lx;  // n
  const uint wrow = gl_WorkGroupID.x * 16 + ly;  // the weight row this thread stages
  float acc = 0.0;
  for (uint k0 = 0; k0 < p.K; k0 += 16) {
    const uint k = k0 + lx;
    xs[ly][lx] = (row < p.M && k < p.K) ? x[row * p.K + k] : 0.0;
    ws[ly][lx] = (wrow < p.N && k < p.K) ? weight(wrow, k) : 0.0;
    barrier();
    for (uint kk = 0; kk < 16; ++kk) acc = fma(xs[ly][kk], ws[lx][kk], acc);
    barrier();
  }
  if (row < p.M && col < p.N) {
    const uint i = row * p.N + col;
    y[i] = p.accumulate != 0 ? y[i] + acc : acc;
  }
}
