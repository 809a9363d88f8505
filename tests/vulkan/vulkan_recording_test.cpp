// vk::Ops' recording: several ops in one command buffer give what they give run one by one, copies ordered
// between dispatches, hundreds of dispatches of one kernel in one recording (descriptor pools grow), uploads
// into buffers the recording does not use yet, abandoning, byte offsets, and misuse as errors.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "dllm/error.h"
#include "kernels/ref/reference.h"
#include "test_util.h"
#include "vulkan/ops.h"
#include "vulkan_test_util.h"

namespace dllm::vk {
namespace {

using test_util::device_copy;
using test_util::download;
using test_util::random_values;

// rms_norm -> matmul_f32 -> add_bias -> copy (rows shifted by one through a byte offset) -> silu_mul: the
// block of a forward, recorded into one command buffer, against the same ops run one at a time and against
// the scalar references. Before the submit the output holds its old values: the ops were recorded, not run.
TEST(VulkanRecording, OneRecordingGivesWhatOpsRunOneByOneGive) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 5, dim = 40, hidden = 37;
  const auto x = random_values(size_t{rows} * dim, 1.0f, 41), norm_w = random_values(dim, 1.0f, 42);
  const auto w = random_values(size_t{hidden} * dim, 0.2f, 43), bias = random_values(hidden, 1.0f, 44);
  Buffer bx = device_copy(ctx, x), bn = device_copy(ctx, norm_w), bw = device_copy(ctx, w);
  Buffer bb = device_copy(ctx, bias);
  const size_t row_bytes = size_t{hidden} * sizeof(float), shifted = size_t{rows - 1} * hidden;
  auto forward = [&](Buffer& xn, Buffer& h, Buffer& g, Buffer& out) {
    ops.rms_norm(bx, bn, xn, rows, dim, 1e-6f);
    ops.matmul_f32(xn, bw, h, rows, hidden, dim, /*accumulate=*/false);
    ops.add_bias(h, bb, rows, hidden);
    ops.copy(h, row_bytes, g, 0, shifted * sizeof(float));  // g[r] = h[r + 1]
    ops.silu_mul(h, g, out, static_cast<uint32_t>(shifted));
  };
  Buffer xn1(ctx, x.size() * 4), h1(ctx, size_t{rows} * row_bytes), g1(ctx, shifted * 4),
      out1(ctx, shifted * 4);
  forward(xn1, h1, g1, out1);  // one by one
  Buffer xn2(ctx, x.size() * 4), h2(ctx, size_t{rows} * row_bytes), g2(ctx, shifted * 4);
  Buffer out2 = device_copy(ctx, std::vector<float>(shifted, -7.0f));
  ops.begin();
  EXPECT_TRUE(ops.recording());
  forward(xn2, h2, g2, out2);
  EXPECT_EQ(download(out2, shifted), std::vector<float>(shifted, -7.0f)) << "an op ran before the submit";
  ops.submit();
  EXPECT_FALSE(ops.recording());
  const auto got = download(out2, shifted);
  EXPECT_EQ(got, download(out1, shifted));

  std::vector<float> xn(x.size()), h(size_t{rows} * hidden), want(shifted);
  ref::rms_norm(x.data(), norm_w.data(), rows, dim, 1e-6f, xn.data());
  ref::matmul(xn.data(), w.data(), rows, hidden, dim, h.data());
  for (size_t i = 0; i < h.size(); ++i) h[i] += bias[i % hidden];
  ref::silu_mul(h.data(), h.data() + hidden, static_cast<int64_t>(shifted), want.data());
  EXPECT_LT(test::max_relative_error(got, want), 1e-5f);
}

// 300 dispatches of one kernel in one recording: more descriptor sets live at once than a kernel's first pool
// holds. A second such recording reuses the pools the first one grew.
TEST(VulkanRecording, HundredsOfDispatchesOfOneKernelInOneRecording) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t n = 1000, times = 300;
  const size_t pools_before = ops.descriptor_pools();
  Buffer x = device_copy(ctx, std::vector<float>(n, 0.0f)),
         one = device_copy(ctx, std::vector<float>(n, 1.0f));
  ops.begin();
  for (uint32_t i = 0; i < times; ++i) ops.add(x, one, n);
  ops.submit();
  EXPECT_EQ(download(x, n), std::vector<float>(n, float(times)));
  const size_t pools_grown = ops.descriptor_pools();
  EXPECT_GT(pools_grown, pools_before);
  ops.begin();
  for (uint32_t i = 0; i < times; ++i) ops.add(x, one, n);
  ops.submit();
  EXPECT_EQ(download(x, n), std::vector<float>(n, float(2 * times)));
  EXPECT_EQ(ops.descriptor_pools(), pools_grown);
}

// Uploads during a recording into buffers it does not use yet (one of them a temporary) are what the ops
// after them read; the temporary is gone after the submit, and ops outside a recording run at once again.
TEST(VulkanRecording, UploadsIntoBuffersTheRecordingDoesNotUseYet) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t n = 300;
  Buffer x = device_copy(ctx, std::vector<float>(n, 1.0f)), y(ctx, n * sizeof(float));
  ops.begin();
  ops.add(x, x, n);  // 2
  y.upload(std::span<const float>(std::vector<float>(n, 10.0f)));
  ops.add(x, y, n);  // 12
  Buffer& t = ops.temporary(n * sizeof(float));
  t.upload(std::span<const float>(std::vector<float>(n, 100.0f)));
  ops.add(x, t, n);  // 112
  ops.submit();
  EXPECT_EQ(download(x, n), std::vector<float>(n, 112.0f));
  ops.add(x, y, n);
  EXPECT_EQ(download(x, n), std::vector<float>(n, 122.0f));
}

// An abandoned recording runs nothing, nor does one its Ops is destroyed with; recording works again after.
TEST(VulkanRecording, AnAbandonedRecordingRunsNothing) {
  NEED_DEVICE();
  Context ctx(0);
  const uint32_t n = 100;
  Buffer x = device_copy(ctx, std::vector<float>(n, 1.0f));
  {
    Ops ops(ctx);
    ops.begin();
    ops.add(x, x, n);
    ops.rope_neox(x, 1, 1, n, std::vector<int64_t>{5}, 10000.0);  // a temporary in the abandoned recording
    ops.abandon();
    EXPECT_FALSE(ops.recording());
    ops.abandon();  // none open: nothing
    EXPECT_EQ(download(x, n), std::vector<float>(n, 1.0f));
    ops.begin();
    ops.add(x, x, n);
    ops.submit();
    EXPECT_EQ(download(x, n), std::vector<float>(n, 2.0f));
    ops.begin();
    ops.add(x, x, n);
  }  // destroyed while recording
  EXPECT_EQ(download(x, n), std::vector<float>(n, 2.0f));
}

// Byte offsets of upload, download and copy (compute -> copy -> compute in one recording), and their ranges,
// on mapped buffers and on staged ones (what a discrete GPU without resizable BAR does; lavapipe would map
// them).
TEST(VulkanRecording, OffsetsOfUploadsDownloadsAndCopies) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  for (bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged" : "mapped");
    Buffer a(ctx, 10 * sizeof(float), staged), b(ctx, 10 * sizeof(float), staged);
    a.upload(std::span<const float>(std::vector<float>(10, 0.0f)));
    b.upload(std::span<const float>(std::vector<float>(10, 0.0f)));
    a.upload(std::span<const float>(std::vector<float>{1, 2, 3}), 4 * sizeof(float));
    EXPECT_EQ(download(a, 10), (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 0, 0, 0}));
    std::vector<float> part(2);
    a.download(std::span<float>(part), 5 * sizeof(float));
    EXPECT_EQ(part, (std::vector<float>{2, 3}));

    ops.begin();
    ops.add(a, a, 10);                                         // a = 0 0 0 0 2 4 6 0 0 0
    ops.copy(a, 4 * sizeof(float), b, 1 * sizeof(float), 12);  // b = 0 2 4 6 0 ...
    ops.copy(a, 4 * sizeof(float), a, 0, 8);                   // a = 2 4 0 0 2 4 6 0 0 0
    ops.add(b, a, 10);                                         // b = 2 6 4 6 2 4 6 0 0 0
    ops.submit();
    EXPECT_EQ(download(b, 10), (std::vector<float>{2, 6, 4, 6, 2, 4, 6, 0, 0, 0}));

    EXPECT_THROW(a.upload(std::span<const float>(std::vector<float>(3)), 8 * sizeof(float)), Error);
    EXPECT_THROW(a.download(std::span<float>(part), 9 * sizeof(float)), Error);
    EXPECT_THROW(ops.copy(a, 0, b, 36, 8), Error);  // past b's end
    EXPECT_THROW(ops.copy(a, 0, a, 4, 8), Error);   // overlapping
    EXPECT_THROW(ops.copy(a, 0, b, 0, 0), Error);   // nothing
  }
}

TEST(VulkanRecording, MisuseIsAnError) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  Buffer logits = device_copy(ctx, std::vector<float>(8, 0.0f));
  EXPECT_THROW(ops.submit(), Error);
  EXPECT_THROW(ops.temporary(16), Error);
  ops.begin();
  EXPECT_THROW(ops.begin(), Error);
  EXPECT_THROW(ops.token_stats(logits, 2, 4), Error);
  EXPECT_THROW(ops.add(logits, logits, 9), Error);  // a shape error leaves the recording open
  EXPECT_TRUE(ops.recording());
  ops.submit();
  EXPECT_EQ(ops.token_stats(logits, 2, 4).argmax, (std::vector<uint32_t>{0, 0}));
}

}  // namespace
}  // namespace dllm::vk
