// Package files, and the builder that records a run and plans its memory.
#include <fstream>
#include <sstream>
#include <algorithm>
#include <map>
#include <optional>

#include "npusim/common/bytes.h"
#include "npusim/common/output_files.h"
#include "npusim/deploy/package.h"
#include "package.pb.h"

namespace npu::deploy {
namespace {

// Version 3: methods (version 2 had one: inputs, outputs and steps of the package). Version 2: a header with
// a checksum before the protobuf (version 1 had none: 1 in 100 flipped bytes changed a package's outputs
// silently).
constexpr uint32_t kFormatVersion = 3;
// The file: magic (8 bytes), format version (u32), CRC-32 of the payload (u32), payload length (u64), all
// little-endian, then the payload (proto::Package).
constexpr char kMagic[8] = {'N', 'P', 'U', 'P', 'K', 'G', 0, 0};
constexpr size_t kHeaderBytes = 24;
constexpr uint64_t kMaxPackageBytes = uint64_t{2} << 30;  // protobuf's limit on one message

// a * b, or why not: sizes and offsets of a package are counts the file gives, not trusted.
int64_t checked_multiply(int64_t a, int64_t b, const std::string& what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) throw PackageError("package: " + what + " overflows 64 bits");
  return product;
}
int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) throw PackageError("package: " + what + " overflows 64 bits");
  return sum;
}

TensorSpec from_proto(const proto::TensorSpec& p) {
  TensorSpec spec;
  spec.name = p.name();
  const auto dtype = isa::dtype_from_name(p.dtype());
  if (!dtype) throw PackageError("package: tensor '" + p.name() + "' has an unknown dtype '" + p.dtype() + "'");
  spec.dtype = *dtype;
  spec.shape.assign(p.shape().begin(), p.shape().end());
  spec.strides.assign(p.strides().begin(), p.strides().end());
  if (spec.shape.size() != spec.strides.size()) throw PackageError("package: tensor '" + p.name() + "' has as many strides as dims");
  spec.storage_offset = p.storage_offset();
  spec.buffer = p.buffer();
  return spec;
}

void to_proto(const TensorSpec& spec, proto::TensorSpec* p) {
  p->set_name(spec.name);
  p->set_dtype(std::string(isa::dtype_name(spec.dtype)));
  for (const int64_t d : spec.shape) p->add_shape(d);
  for (const int64_t s : spec.strides) p->add_strides(s);
  p->set_storage_offset(spec.storage_offset);
  p->set_buffer(spec.buffer);
}

// One method's signature and steps (validate).
template <typename CheckBuffer>
void validate_method(const proto::Package& p, const proto::Method& m, const CheckBuffer& check_buffer) {
  for (const auto* list : {&m.inputs(), &m.outputs()})
    for (const proto::TensorSpec& t : *list) {
      const TensorSpec spec = from_proto(t);
      const std::string what = "tensor '" + spec.name + "'";
      check_buffer(spec.buffer, what);
      if (spec.storage_offset < 0) throw PackageError("package: " + what + " has a negative storage offset");
      // Its elements, and the last element it reaches: every product and sum checked.
      int64_t elements = 1;
      int64_t last = spec.storage_offset;
      for (size_t d = 0; d < spec.shape.size(); ++d) {
        if (spec.shape[d] < 0 || spec.strides[d] < 0) throw PackageError("package: " + what + " has a negative size or stride");
        elements = checked_multiply(elements, spec.shape[d], what + "'s element count");
        if (spec.shape[d] > 0) last = checked_add(last, checked_multiply(spec.shape[d] - 1, spec.strides[d], what + "'s extent"), what + "'s extent");
      }
      const int64_t element_bytes = int64_t(isa::dtype_size_bytes(spec.dtype));
      checked_multiply(elements, element_bytes, what + "'s size in bytes");
      const int64_t end_bytes = elements == 0 ? 0 : checked_multiply(checked_add(last, 1, what + "'s extent"), element_bytes, what + "'s extent in bytes");
      if (uint64_t(end_bytes) > p.buffers(int(spec.buffer)).size_bytes())
        throw PackageError("package: " + what + " reaches past its buffer");
    }
  // An output's dtype is the one its last writer wrote: a relabelled dtype would read the bytes as another type.
  std::map<uint32_t, std::optional<isa::Program>> parsed;  // programs parsed on demand
  for (const proto::TensorSpec& t : m.outputs()) {
    for (int step = m.steps_size() - 1; step >= 0; --step) {
      const proto::Step& s = m.steps(step);
      if (s.has_upload() && s.upload().buffer() == t.buffer()) break;
      if (!s.has_launch() || s.launch().program() >= uint32_t(p.programs_size())) continue;
      const proto::Binding* writer = nullptr;
      for (const proto::Binding& b : s.launch().bindings())
        if (b.buffer() == t.buffer() && b.symbol() == "out") writer = &b;
      if (writer == nullptr) continue;
      std::optional<isa::Program>& program = parsed[s.launch().program()];
      if (!program) {
        try {
          program = isa::parse_program(p.programs(int(s.launch().program())));
        } catch (const isa::ProgramFormatError& e) {
          throw PackageError(std::string("package: program ") + std::to_string(s.launch().program()) + ": " + e.what());
        }
      }
      const isa::Symbol* symbol = program->find_symbol(writer->symbol());
      if (symbol != nullptr && symbol->dtype != *isa::dtype_from_name(t.dtype()))
        throw PackageError("package: output '" + t.name() + "' is declared " + t.dtype() + ", but the launch of " + s.launch().op() +
                           " that writes it writes " + std::string(isa::dtype_name(symbol->dtype)));
      break;
    }
  }
  for (const proto::Step& s : m.steps()) {
    if (s.has_launch()) {
      if (s.launch().program() >= uint32_t(p.programs_size())) throw PackageError("package: a launch names a program that does not exist");
      for (const proto::Binding& b : s.launch().bindings()) check_buffer(b.buffer(), "a launch of " + s.launch().op());
    } else if (s.has_upload()) {
      check_buffer(s.upload().buffer(), "an upload");
      const uint64_t size = p.buffers(int(s.upload().buffer())).size_bytes();
      if (s.upload().offset_bytes() > size || s.upload().data().size() > size - s.upload().offset_bytes())
        throw PackageError("package: an upload reaches past its buffer");
    } else {
      throw PackageError("package: a step that is neither a launch nor an upload");
    }
  }
}

// Everything a runner relies on, checked once: indices in range, views inside their buffers.
void validate(const proto::Package& p) {
  if (p.format_version() != kFormatVersion)
    throw PackageError("package: format version " + std::to_string(p.format_version()) + ", this build reads " + std::to_string(kFormatVersion));
  const auto check_buffer = [&](uint32_t b, const std::string& what) {
    if (b >= uint32_t(p.buffers_size())) throw PackageError("package: " + what + " names buffer " + std::to_string(b) + ", which does not exist");
  };
  if (p.methods_size() == 0) throw PackageError("package: no methods");
  for (const proto::Method& m : p.methods()) {
    if (m.name().empty()) throw PackageError("package: a method without a name");
    if (std::count_if(p.methods().begin(), p.methods().end(), [&](const proto::Method& o) { return o.name() == m.name(); }) > 1)
      throw PackageError("package: two methods named '" + m.name() + "'");
    validate_method(p, m, check_buffer);
  }
  for (const proto::Constant& c : p.constants()) {
    check_buffer(c.buffer(), "a constant");
    if (c.data().size() > p.buffers(int(c.buffer())).size_bytes()) throw PackageError("package: a constant is larger than its buffer");
  }
  for (const uint32_t b : p.state_buffers()) check_buffer(b, "the state");
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::string TensorSpec::to_string() const {
  std::string text = name + ": " + std::string(isa::dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

Package::Package() : package_(std::make_unique<proto::Package>()) {}
Package::Package(proto::Package package) : package_(std::make_unique<proto::Package>(std::move(package))) {}
Package::Package(const Package& other) : package_(std::make_unique<proto::Package>(*other.package_)) {}
Package& Package::operator=(const Package& other) {
  *package_ = *other.package_;
  return *this;
}
Package::Package(Package&&) noexcept = default;
Package& Package::operator=(Package&&) noexcept = default;
Package::~Package() = default;

Package Package::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PackageError(path + ": cannot open");
  std::string bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, size_t(in.gcount()));
    if (bytes.size() > kMaxPackageBytes + kHeaderBytes) throw PackageError(path + ": larger than the 2 GiB a package may be");
  }
  if (in.bad()) throw PackageError(path + ": cannot read");
  try {
    return parse(bytes);
  } catch (const PackageError& e) {
    throw PackageError(path + ": " + e.what());
  }
}

Package Package::parse(const std::string& bytes) {
  if (bytes.size() < sizeof kMagic || bytes.compare(0, sizeof kMagic, std::string(kMagic, sizeof kMagic)) != 0)
    throw PackageError("not a package (bad magic; packages of format version 1, from before 2026-12-06, must be exported again)");
  if (bytes.size() < kHeaderBytes) throw PackageError("truncated package header");
  const uint64_t version = read_le(bytes, 8, 4);
  if (version != kFormatVersion)
    throw PackageError("package format version " + std::to_string(version) + ", this build reads " + std::to_string(kFormatVersion) +
                       (version < kFormatVersion ? " (export the model again)" : ""));
  const uint64_t length = read_le(bytes, 16, 8);
  if (length != bytes.size() - kHeaderBytes)
    throw PackageError("truncated or padded package: the header says " + std::to_string(length) + " payload bytes, the file has " +
                       std::to_string(bytes.size() - kHeaderBytes));
  if (read_le(bytes, 12, 4) != crc32_of(std::string_view(bytes).substr(kHeaderBytes))) throw PackageError("corrupt package (payload checksum mismatch)");
  proto::Package p;
  if (length > kMaxPackageBytes || !p.ParseFromArray(bytes.data() + kHeaderBytes, int(length)))
    throw PackageError("not a package (the protobuf does not parse)");
  validate(p);
  return Package(std::move(p));
}

std::string Package::serialize() const {
  std::string payload;
  if (!package_->SerializeToString(&payload)) throw PackageError("cannot serialize the package");
  if (payload.size() > kMaxPackageBytes) throw PackageError("the package is larger than the 2 GiB a package may be");
  std::string bytes(kHeaderBytes, '\0');
  bytes.replace(0, sizeof kMagic, kMagic, sizeof kMagic);
  write_le(bytes, 8, 4, kFormatVersion);
  write_le(bytes, 12, 4, crc32_of(payload));
  write_le(bytes, 16, 8, payload.size());
  return bytes + payload;
}

void Package::write(const std::string& path) const {
  const std::string bytes = serialize();
  try {
    write_file_atomically(path, bytes);
  } catch (const OutputFileError& e) {
    throw PackageError(e.what());
  }
}

std::string Package::config_name() const { return package_->config_name(); }
std::string Package::config_text() const { return package_->config_text(); }
size_t Package::programs() const { return size_t(package_->programs_size()); }

std::vector<std::string> Package::methods() const {
  std::vector<std::string> names;
  for (const proto::Method& m : package_->methods()) names.push_back(m.name());
  return names;
}

size_t Package::method(const std::string& name) const {
  std::string names;
  for (int m = 0; m < package_->methods_size(); ++m) {
    if (package_->methods(m).name() == name) return size_t(m);
    names += (m ? ", " : "") + package_->methods(m).name();
  }
  throw PackageError("the package has no method '" + name + "' (its methods: " + names + ")");
}

namespace {
const proto::Method& method_at(const proto::Package& p, size_t method) {
  if (method >= size_t(p.methods_size()))
    throw PackageError("the package has " + std::to_string(p.methods_size()) + " methods, not a method " + std::to_string(method));
  return p.methods(int(method));
}
size_t launches_of(const proto::Method& m) {
  return size_t(std::count_if(m.steps().begin(), m.steps().end(), [](const proto::Step& s) { return s.has_launch(); }));
}
}  // namespace

std::vector<TensorSpec> Package::inputs(size_t method) const {
  std::vector<TensorSpec> specs;
  for (const proto::TensorSpec& t : method_at(*package_, method).inputs()) specs.push_back(from_proto(t));
  return specs;
}

std::vector<TensorSpec> Package::outputs(size_t method) const {
  std::vector<TensorSpec> specs;
  for (const proto::TensorSpec& t : method_at(*package_, method).outputs()) specs.push_back(from_proto(t));
  return specs;
}

size_t Package::launches() const {
  size_t n = 0;
  for (const proto::Method& m : package_->methods()) n += launches_of(m);
  return n;
}

size_t Package::buffer_count() const { return size_t(package_->buffers_size()); }
size_t Package::logical_buffer_count() const { return size_t(package_->logical_buffers()); }

uint64_t Package::planned_bytes() const {
  uint64_t bytes = 0;
  for (const proto::Buffer& b : package_->buffers()) bytes += b.size_bytes();
  return bytes;
}

std::string Package::summary() const {
  std::ostringstream out;
  const proto::Package& p = *package_;
  out << "package from " << (p.source().empty() ? "(unknown)" : p.source()) << ", for chip config '" << p.config_name() << "'\n";
  // One method's lines are indented as a package of one method's were; several are each headed by their name.
  const bool several = p.methods_size() > 1;
  const std::string indent = several ? "    " : "  ";
  for (int m = 0; m < p.methods_size(); ++m) {
    if (several) out << "  method " << p.methods(m).name() << ":\n";
    for (const TensorSpec& t : inputs(size_t(m))) out << indent << "input  " << t.to_string() << "\n";
    for (const TensorSpec& t : outputs(size_t(m))) out << indent << "output " << t.to_string() << "\n";
    const size_t launched = launches_of(p.methods(m));
    out << indent << launched << " kernel launches" << (several ? "" : " of " + std::to_string(programs()) + " programs") << ", "
        << (size_t(p.methods(m).steps_size()) - launched) << " uploads\n";
  }
  if (several) out << "  " << programs() << " programs\n";
  uint64_t constant_bytes = 0;
  for (const proto::Constant& c : p.constants()) constant_bytes += c.data().size();
  out << "  memory plan: " << p.buffers_size() << " buffers, " << planned_bytes() << " bytes (" << p.logical_buffers() << " buffers, "
      << p.logical_bytes() << " bytes before planning); weights " << p.constants_size() << " buffers, " << constant_bytes << " bytes\n";
  if (p.state_buffers_size() > 0) {
    uint64_t state_bytes = 0;
    for (const uint32_t b : p.state_buffers()) state_bytes += p.buffers(int(b)).size_bytes();
    out << "  state: " << p.state_buffers_size() << " buffers, " << state_bytes << " bytes, kept from one run to the next\n";
  }
  return out.str();
}

// ---- the builder ------------------------------------------------------------------

PackageBuilder::PackageBuilder(std::string source, std::string config_name, std::string config_text)
    : package_(std::make_unique<proto::Package>()) {
  package_->set_format_version(kFormatVersion);
  package_->set_source(std::move(source));
  package_->set_config_name(std::move(config_name));
  package_->set_config_text(std::move(config_text));
}

PackageBuilder::~PackageBuilder() = default;

void PackageBuilder::method(const std::string& name) {
  for (const proto::Method& m : package_->methods())
    if (m.name() == name) throw PackageError("package: two methods named '" + name + "'");
  if (name.empty()) throw PackageError("package: a method needs a name");
  package_->add_methods()->set_name(name);
  method_first_step_.push_back(steps_);
  // What a later method records at an identity an earlier one used is its own buffer, unless it is a weight
  // or state (the recorder's allocator hands the addresses of freed intermediates out again).
  for (auto it = by_identity_.begin(); it != by_identity_.end();)
    it = buffers_[it->second].loaded ? std::next(it) : by_identity_.erase(it);
}

proto::Method& PackageBuilder::current_method() {
  if (package_->methods_size() == 0) method("forward");
  return *package_->mutable_methods(package_->methods_size() - 1);
}

uint32_t PackageBuilder::buffer(uint64_t identity, uint64_t size_bytes) {
  const auto it = by_identity_.find(identity);
  if (it != by_identity_.end()) {
    // The recorder's allocator may hand the same identity out again once it is free: one buffer, the larger size.
    buffers_[it->second].size_bytes = std::max(buffers_[it->second].size_bytes, size_bytes);
    return it->second;
  }
  const uint32_t id = uint32_t(buffers_.size());
  buffers_.push_back({size_bytes});
  by_identity_.emplace(identity, id);
  return id;
}

bool PackageBuilder::has_contents(uint32_t buffer) const {
  const Logical& b = buffers_.at(buffer);
  return b.written || b.loaded || b.signature_of >= 0;
}

void PackageBuilder::touch(uint32_t buffer) {
  Logical& b = buffers_.at(buffer);
  if (b.first_step < 0) b.first_step = steps_;
  b.last_step = steps_;
}

void PackageBuilder::input(TensorSpec spec) {
  current_method();
  buffers_.at(spec.buffer).signature_of = package_->methods_size() - 1;
  to_proto(spec, current_method().add_inputs());
}

void PackageBuilder::output(TensorSpec spec) {
  current_method();
  buffers_.at(spec.buffer).signature_of = package_->methods_size() - 1;
  to_proto(spec, current_method().add_outputs());
}

void PackageBuilder::state(uint32_t buffer) {
  buffers_.at(buffer).loaded = true;
  buffers_.at(buffer).state = true;
}

void PackageBuilder::constant(uint32_t buffer, std::vector<uint8_t> data) {
  buffers_.at(buffer).loaded = true;
  constants_.emplace_back(buffer, std::move(data));
}

uint32_t PackageBuilder::program(const void* identity, const isa::Program& program) {
  const auto it = programs_.find(identity);
  if (it != programs_.end()) return it->second;
  const uint32_t id = uint32_t(package_->programs_size());
  package_->add_programs(isa::serialize_program(program));
  programs_.emplace(identity, id);
  return id;
}

void PackageBuilder::launch(uint32_t program, const std::vector<std::pair<std::string, uint32_t>>& bindings, uint64_t core_mask,
                            const std::string& op) {
  for (const auto& [symbol, buffer] : bindings) {
    touch(buffer);
    if (symbol == "out") buffers_.at(buffer).written = true;
  }
  proto::Launch* launch = current_method().add_steps()->mutable_launch();
  ++steps_;
  launch->set_program(program);
  launch->set_core_mask(core_mask);
  launch->set_op(op);
  for (const auto& [symbol, buffer] : bindings) {
    proto::Binding* b = launch->add_bindings();
    b->set_symbol(symbol);
    b->set_buffer(buffer);
  }
}

void PackageBuilder::upload(uint32_t buffer, uint64_t offset_bytes, std::vector<uint8_t> data) {
  touch(buffer);
  buffers_.at(buffer).written = true;
  proto::Upload* upload = current_method().add_steps()->mutable_upload();
  ++steps_;
  upload->set_buffer(buffer);
  upload->set_offset_bytes(offset_bytes);
  upload->set_data(data.data(), data.size());
}

Package PackageBuilder::finish() {
  current_method();
  proto::Package& p = *package_;
  // An input or output lives through every run of its method: from its first step (the input is copied in
  // before it) to its last (the output is read after it).
  for (Logical& b : buffers_) {
    if (b.signature_of < 0) continue;
    const int64_t first = method_first_step_[size_t(b.signature_of)];
    const int64_t last = size_t(b.signature_of) + 1 < method_first_step_.size() ? method_first_step_[size_t(b.signature_of) + 1] - 1 : steps_ - 1;
    b.first_step = b.first_step < 0 ? first : std::min(b.first_step, first);
    b.last_step = std::max({b.last_step, last, first});
  }
  // A weight that a run also overwrites (its buffer reused by the recorder's
  // allocator) is written again at the start of every run of every method, not
  // once at load; state is written once, and what a run writes there is the next run's.
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> loaded_once;
  google::protobuf::RepeatedPtrField<proto::Step> reloads;
  for (auto& [buffer, data] : constants_) {
    if (!buffers_[buffer].written || buffers_[buffer].state) {
      loaded_once.emplace_back(buffer, std::move(data));
      continue;
    }
    proto::Upload* upload = reloads.Add()->mutable_upload();
    upload->set_buffer(buffer);
    upload->set_data(data.data(), data.size());
  }
  if (!reloads.empty())
    for (proto::Method& m : *p.mutable_methods()) {
      google::protobuf::RepeatedPtrField<proto::Step> steps = reloads;
      for (proto::Step& step : *m.mutable_steps()) *steps.Add() = std::move(step);
      m.mutable_steps()->Swap(&steps);
    }
  constants_ = std::move(loaded_once);
  // The memory plan: in order of first use, each buffer takes the first
  // planned buffer that is free by then (growing it if it is too small), or a
  // new one. Weights and state keep one of their own.
  std::vector<uint32_t> order;
  uint64_t logical_bytes = 0;
  for (uint32_t b = 0; b < buffers_.size(); ++b) {
    if (buffers_[b].first_step < 0 && !buffers_[b].loaded) continue;  // never used
    order.push_back(b);
    logical_bytes += buffers_[b].size_bytes;
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return buffers_[x].first_step < buffers_[y].first_step; });
  struct Planned {
    uint64_t size_bytes;
    int64_t busy_until;  // the last step of its latest tenant; INT64_MAX: a weight or state
  };
  std::vector<Planned> planned;
  std::vector<uint32_t> home(buffers_.size(), UINT32_MAX);
  for (const uint32_t b : order) {
    const Logical& l = buffers_[b];
    uint32_t chosen = UINT32_MAX;
    if (!l.loaded)
      for (uint32_t q = 0; q < planned.size(); ++q)
        if (planned[q].busy_until < l.first_step && (chosen == UINT32_MAX || planned[q].size_bytes >= l.size_bytes)) {
          chosen = q;
          if (planned[q].size_bytes >= l.size_bytes) break;
        }
    if (chosen == UINT32_MAX) chosen = uint32_t(planned.size()), planned.push_back({0, -1});
    planned[chosen].size_bytes = std::max(planned[chosen].size_bytes, l.size_bytes);
    planned[chosen].busy_until = l.loaded ? INT64_MAX : l.last_step;
    home[b] = chosen;
  }
  for (const Planned& b : planned) p.add_buffers()->set_size_bytes(b.size_bytes);
  for (proto::Method& m : *p.mutable_methods()) {
    for (auto* list : {m.mutable_inputs(), m.mutable_outputs()})
      for (proto::TensorSpec& t : *list) t.set_buffer(home.at(t.buffer()));
    for (proto::Step& s : *m.mutable_steps()) {
      if (s.has_launch())
        for (proto::Binding& b : *s.mutable_launch()->mutable_bindings()) b.set_buffer(home.at(b.buffer()));
      else
        s.mutable_upload()->set_buffer(home.at(s.upload().buffer()));
    }
  }
  for (auto& [buffer, data] : constants_) {
    proto::Constant* c = p.add_constants();
    c->set_buffer(home.at(buffer));
    c->set_data(data.data(), data.size());
  }
  for (uint32_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].state) p.add_state_buffers(home.at(b));
  p.set_logical_buffers(order.size());
  p.set_logical_bytes(logical_bytes);
  validate(p);
  return Package(std::move(p));
}

}  // namespace npu::deploy
