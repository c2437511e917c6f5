// The package builder (memory plan, weights) and the file format's checks, without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>

#include "npusim/compiler/compiler.h"
#include "npusim/deploy/package.h"
#include "npusim/sim/config_loader.h"
#include "package.pb.h"

namespace npu::deploy {
namespace {

using compiler::OpDesc;
using compiler::OpKind;
using compiler::TensorDesc;

TensorSpec spec(const std::string& name, uint32_t buffer, std::vector<int64_t> shape) {
  TensorSpec t;
  t.name = name;
  t.shape = shape;
  t.strides = TensorDesc::contiguous(isa::DType::F32, shape).strides;
  t.buffer = buffer;
  return t;
}

class Builder : public ::testing::Test {
 protected:
  Builder() : compiler_(sim::load_chip_config("tiny")), builder_("test", "tiny", sim::dump_chip_config(sim::load_chip_config("tiny"))) {
    const TensorDesc t = TensorDesc::contiguous(isa::DType::F32, {4, 8});
    relu_ = compiler_.compile(OpDesc(OpKind::RELU, {t}, t));
  }
  uint32_t relu_program() { return builder_.program(relu_.get(), relu_->program); }
  void relu(uint32_t in, uint32_t out) { builder_.launch(relu_program(), {{"in0", in}, {"out", out}}, 1, "relu"); }

  compiler::Compiler compiler_;
  std::shared_ptr<const compiler::Kernel> relu_;
  PackageBuilder builder_;
};

TEST_F(Builder, IntermediatesWhoseLifetimesDoNotOverlapShareABuffer) {
  const uint32_t in = builder_.buffer(1000, 128), a = builder_.buffer(2000, 128), b = builder_.buffer(3000, 128);
  const uint32_t c = builder_.buffer(4000, 64), out = builder_.buffer(5000, 128);
  builder_.input(spec("x", in, {4, 8}));
  relu(in, a);   // step 0: a lives 0..1
  relu(a, b);    // step 1: b lives 1..2
  relu(b, c);    // step 2: c lives 2..3, after a's end: c takes a's buffer
  relu(c, out);  // step 3
  builder_.output(spec("y", out, {4, 8}));
  const Package package = builder_.finish();
  EXPECT_EQ(package.raw().logical_buffers(), 5u);
  ASSERT_EQ(package.raw().buffers_size(), 4);  // in, out, a=c, b
  const auto& steps = package.raw().methods(0).steps();
  const uint32_t a_home = steps[0].launch().bindings(1).buffer(), b_home = steps[1].launch().bindings(1).buffer();
  EXPECT_NE(a_home, b_home);  // a and b overlap at step 1
  EXPECT_EQ(steps[2].launch().bindings(1).buffer(), a_home);
  EXPECT_EQ(steps[3].launch().bindings(0).buffer(), a_home);
  EXPECT_EQ(package.planned_bytes(), 3 * 128u + 128u);
  EXPECT_EQ(package.launches(), 4u);
  EXPECT_EQ(package.programs(), 1u);  // one program, launched four times
}

TEST_F(Builder, InputsOutputsAndWeightsKeepTheirOwnBuffers) {
  const uint32_t in = builder_.buffer(1, 128), weight = builder_.buffer(2, 128), a = builder_.buffer(3, 128), out = builder_.buffer(4, 128);
  builder_.input(spec("x", in, {4, 8}));
  EXPECT_TRUE(builder_.has_contents(in));
  EXPECT_FALSE(builder_.has_contents(weight));  // read before any step writes it: the recorder gives its contents
  builder_.constant(weight, std::vector<uint8_t>(128, 7));
  EXPECT_TRUE(builder_.has_contents(weight));
  builder_.launch(relu_program(), {{"in0", in}, {"in1", weight}, {"out", a}}, 1, "add");
  relu(a, out);
  builder_.output(spec("y", out, {4, 8}));
  const Package package = builder_.finish();
  ASSERT_EQ(package.raw().buffers_size(), 4);
  ASSERT_EQ(package.raw().constants_size(), 1);
  EXPECT_EQ(package.raw().constants(0).data(), std::string(128, '\7'));
}

TEST_F(Builder, AWeightTheRunOverwritesIsWrittenAgainAtEveryRun) {
  const uint32_t in = builder_.buffer(1, 128), reused = builder_.buffer(2, 128), out = builder_.buffer(3, 128);
  builder_.input(spec("x", in, {4, 8}));
  builder_.constant(reused, std::vector<uint8_t>(128, 1));
  relu(reused, out);
  relu(in, reused);  // the recorder's allocator gave the weight's address to a later tensor
  builder_.output(spec("y", out, {4, 8}));
  const Package package = builder_.finish();
  EXPECT_EQ(package.raw().constants_size(), 0);
  ASSERT_EQ(package.raw().methods(0).steps_size(), 3);
  ASSERT_TRUE(package.raw().methods(0).steps(0).has_upload());
  EXPECT_EQ(package.raw().methods(0).steps(0).upload().data(), std::string(128, '\1'));
}

TEST_F(Builder, StateIsLoadedOnceThoughTheRunWritesIt) {
  // A KV cache: read (its contents before the run: the constant), then written back by the run.
  const uint32_t in = builder_.buffer(1, 128), cache = builder_.buffer(2, 128), out = builder_.buffer(3, 128);
  builder_.input(spec("x", in, {4, 8}));
  builder_.state(cache);
  EXPECT_TRUE(builder_.has_contents(cache));  // pinned: never taken for another tensor's buffer
  builder_.constant(cache, std::vector<uint8_t>(128, 0));
  builder_.launch(relu_program(), {{"in0", in}, {"in1", cache}, {"out", out}}, 1, "add");
  relu(out, cache);
  builder_.output(spec("y", out, {4, 8}));
  const Package package = builder_.finish();
  ASSERT_EQ(package.raw().constants_size(), 1);  // at load, not an upload of every run
  for (const auto& step : package.raw().methods(0).steps()) EXPECT_FALSE(step.has_upload());
  ASSERT_EQ(package.raw().state_buffers_size(), 1);
  EXPECT_EQ(package.raw().state_buffers(0), package.raw().constants(0).buffer());
  EXPECT_EQ(package.raw().state_buffers(0), package.raw().methods(0).steps(1).launch().bindings(1).buffer());
  EXPECT_NE(package.summary().find("state: 1 buffers, 128 bytes, kept from one run to the next"), std::string::npos) << package.summary();
}

TEST_F(Builder, MethodsShareWeightsAndStateAndTheirOtherBuffersShareThePlan) {
  // prefill: x -> a -> y reading weight w and writing state s; decode: the same identities again. The
  // weight and the state are the package's (one buffer each, the weight's contents once); the rest is
  // each method's own, and the decode's tensors take the prefill's buffers in the plan (never both live).
  builder_.method("prefill");
  const uint32_t x = builder_.buffer(1, 128), w = builder_.buffer(2, 128), s = builder_.buffer(3, 128);
  const uint32_t a = builder_.buffer(4, 128), y = builder_.buffer(5, 128);
  builder_.input(spec("x", x, {4, 8}));
  builder_.state(s);
  builder_.constant(s, std::vector<uint8_t>(128, 0));
  builder_.constant(w, std::vector<uint8_t>(128, 7));
  builder_.launch(relu_program(), {{"in0", x}, {"in1", w}, {"out", a}}, 1, "add");
  relu(a, s);
  relu(a, y);
  builder_.output(spec("y", y, {4, 8}));
  builder_.method("decode");
  EXPECT_THROW(builder_.method("decode"), PackageError);
  EXPECT_EQ(builder_.buffer(2, 128), w);  // a weight: the same buffer
  EXPECT_EQ(builder_.buffer(3, 128), s);  // state: the same buffer
  const uint32_t x2 = builder_.buffer(1, 128), a2 = builder_.buffer(4, 128), y2 = builder_.buffer(5, 128);
  EXPECT_NE(x2, x);  // an input of another method at the same identity: a buffer of its own
  EXPECT_FALSE(builder_.has_contents(a2));
  builder_.input(spec("x", x2, {4, 8}));
  builder_.launch(relu_program(), {{"in0", x2}, {"in1", w}, {"in2", s}, {"out", a2}}, 1, "add");
  relu(a2, y2);
  builder_.output(spec("y", y2, {4, 8}));
  const Package package = builder_.finish();
  EXPECT_EQ(package.methods(), (std::vector<std::string>{"prefill", "decode"}));
  EXPECT_EQ(package.method("decode"), 1u);
  EXPECT_THROW(package.method("encode"), PackageError);
  EXPECT_EQ(package.raw().constants_size(), 2);
  EXPECT_EQ(package.raw().logical_buffers(), 8u);
  ASSERT_EQ(package.raw().buffers_size(), 5);  // w, s, and x=x2, a=a2, y=y2
  const auto& prefill = package.raw().methods(0).steps();
  const auto& decode = package.raw().methods(1).steps();
  EXPECT_EQ(decode[0].launch().bindings(1).buffer(), prefill[0].launch().bindings(1).buffer());  // w
  EXPECT_EQ(decode[0].launch().bindings(2).buffer(), prefill[1].launch().bindings(1).buffer());  // s
  const std::string summary = package.summary();
  EXPECT_NE(summary.find("  method prefill:\n    input  x: f32[4,8]\n    output y: f32[4,8]\n    3 kernel launches, 0 uploads\n"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("  method decode:\n"), std::string::npos) << summary;
  // The file checks the methods: names, and each method's views and steps.
  for (const auto& [edit, message] : std::vector<std::pair<std::function<void(proto::Package&)>, std::string>>{
           {[](proto::Package& p) { p.mutable_methods(1)->set_name("prefill"); }, "two methods named 'prefill'"},
           {[](proto::Package& p) { p.mutable_methods(1)->set_name(""); }, "a method without a name"},
           {[](proto::Package& p) { p.clear_methods(); }, "no methods"},
           {[](proto::Package& p) { p.mutable_methods(1)->mutable_inputs(0)->set_buffer(9); }, "does not exist"}}) {
    proto::Package edited = package.raw();
    edit(edited);
    try {
      Package::parse(Package(edited).serialize());
      ADD_FAILURE() << "accepted: " << message;
    } catch (const PackageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST_F(Builder, APackageReadsBackAsWritten) {
  const uint32_t in = builder_.buffer(1, 128), out = builder_.buffer(2, 128);
  builder_.input(spec("x", in, {4, 8}));
  builder_.upload(out, 0, std::vector<uint8_t>(16, 3));
  relu(in, out);
  builder_.output(spec("y", out, {4, 8}));
  const Package written = builder_.finish();
  const std::string path = ::testing::TempDir() + "roundtrip.npupkg";
  written.write(path);
  const Package read = Package::read(path);
  EXPECT_EQ(read.summary(), written.summary());
  EXPECT_EQ(read.config_name(), "tiny");
  ASSERT_EQ(read.inputs().size(), 1u);
  EXPECT_EQ(read.inputs()[0].to_string(), "x: f32[4,8]");
  EXPECT_NE(read.summary().find("1 kernel launches of 1 programs, 1 uploads"), std::string::npos) << read.summary();
}

TEST(PackageFile, WhatIsNotAValidPackageIsSaidSo) {
  const std::string garbage = ::testing::TempDir() + "garbage.npupkg";
  std::ofstream(garbage) << "this is not a protobuf \xff\xff\xff";
  EXPECT_THROW(Package::read(garbage), PackageError);
  EXPECT_THROW(Package::read(::testing::TempDir() + "does-not-exist.npupkg"), PackageError);

  PackageBuilder small("test", "tiny", "");
  small.input(spec("x", small.buffer(1, 16), {4, 8}));  // 128 bytes of tensor in a 16-byte buffer
  try {
    small.finish();
    ADD_FAILURE() << "a tensor past its buffer was accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("reaches past its buffer"), std::string::npos) << e.what();
  }

  PackageBuilder good("test", "tiny", "");
  good.input(spec("x", good.buffer(1, 128), {4, 8}));
  proto::Package edited = good.finish().raw();
  edited.set_format_version(99);
  try {
    Package::parse(Package(edited).serialize());
    ADD_FAILURE() << "a package of another format version was accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("format version 99"), std::string::npos) << e.what();
  }
}

// What a package's file says is checked before anything uses it: every count with overflow-safe arithmetic.
TEST(PackageFile, HostileFieldsAreRefused) {
  PackageBuilder good("test", "tiny", "");
  good.output(spec("y", good.buffer(1, 128), {4, 8}));
  const proto::Package valid = good.finish().raw();
  ASSERT_NO_THROW(Package::parse(Package(valid).serialize()));
  const auto refused = [&](const std::string& what, const std::function<void(proto::Package&)>& edit, const std::string& message) {
    proto::Package edited = valid;
    edit(edited);
    try {
      Package::parse(Package(edited).serialize());
      ADD_FAILURE() << what << ": accepted";
    } catch (const PackageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << what << ": " << e.what();
    }
  };
  refused("a huge negative offset with a huge stride", [](proto::Package& p) {
    p.mutable_methods(0)->mutable_outputs(0)->set_storage_offset(-(int64_t{1} << 40));
    p.mutable_methods(0)->mutable_outputs(0)->set_strides(0, int64_t{1} << 40);
  }, "negative storage offset");
  refused("an offset before the buffer", [](proto::Package& p) { p.mutable_methods(0)->mutable_outputs(0)->set_storage_offset(-4); }, "negative storage offset");
  refused("a shape whose size overflows", [](proto::Package& p) {
    p.mutable_methods(0)->mutable_outputs(0)->set_shape(0, (int64_t{1} << 62) + 2);
  }, "overflows 64 bits");
  refused("a stride whose extent overflows", [](proto::Package& p) {
    p.mutable_methods(0)->mutable_outputs(0)->set_strides(0, int64_t{1} << 62);
  }, "overflows 64 bits");
  refused("a negative size", [](proto::Package& p) { p.mutable_methods(0)->mutable_outputs(0)->set_shape(1, -8); }, "negative size or stride");
  refused("a buffer that does not exist", [](proto::Package& p) { p.mutable_methods(0)->mutable_outputs(0)->set_buffer(5); }, "does not exist");
  refused("an upload past its buffer's end (offset + size wraps)", [](proto::Package& p) {
    proto::Upload* upload = p.mutable_methods(0)->add_steps()->mutable_upload();
    upload->set_buffer(0);
    upload->set_offset_bytes(~uint64_t{0} - 2);
    upload->set_data("12345678");
  }, "reaches past its buffer");
}

TEST(PackageFile, AFlippedByteTruncationOrPaddingIsRefused) {
  PackageBuilder good("test", "tiny", "");
  good.output(spec("y", good.buffer(1, 128), {4, 8}));
  const std::string bytes = good.finish().serialize();
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x10);
    EXPECT_THROW(Package::parse(flipped), PackageError) << "byte " << at << " flipped";
  }
  EXPECT_THROW(Package::parse(bytes.substr(0, bytes.size() - 1)), PackageError);
  EXPECT_THROW(Package::parse(bytes + "x"), PackageError);
  EXPECT_THROW(Package::parse(""), PackageError);
}

// An output read as another dtype than its kernel wrote (f32 relabelled i8) is refused.
TEST_F(Builder, AnOutputRelabelledToAnotherDtypeIsRefused) {
  const uint32_t x = builder_.buffer(1, 128), y = builder_.buffer(2, 128);
  builder_.input(spec("x", x, {4, 8}));
  relu(x, y);
  builder_.output(spec("y", y, {4, 8}));
  proto::Package edited = builder_.finish().raw();
  ASSERT_NO_THROW(Package::parse(Package(edited).serialize()));
  edited.mutable_methods(0)->mutable_outputs(0)->set_dtype("i8");
  try {
    Package::parse(Package(edited).serialize());
    ADD_FAILURE() << "a relabelled output was accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("output 'y' is declared i8, but the launch of relu that writes it writes f32"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace npu::deploy
