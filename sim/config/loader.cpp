// load_chip_config / parse_chip_config / preset_names: text in, validated
// typed config out.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "convert.h"
#include "overrides.h"
#include "npusim/sim/config_loader.h"
#include "presets.h"
#include "text_parser.h"
#include "validate.h"

namespace npu::sim {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw ConfigError(path + ": is a directory, not a chip config");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return text.str();
}

std::string joined_preset_names() {
  std::string names;
  for (const std::string& name : preset_names()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const config_detail::Preset& preset : config_detail::presets()) names.emplace_back(preset.name);
  return names;
}

ChipConfig load_chip_config(const std::string& preset_or_path, const std::vector<std::string>& overrides) {
  if (preset_or_path.find('/') != std::string::npos || ends_with(preset_or_path, ".pbtxt")) {
    return parse_chip_config(read_file(preset_or_path), preset_or_path, overrides);
  }
  for (const config_detail::Preset& preset : config_detail::presets()) {
    if (preset_or_path == preset.name) return parse_chip_config(preset.text, preset.source, overrides);
  }
  throw ConfigError("unknown chip preset \"" + preset_or_path + "\" (presets: " + joined_preset_names() +
                    "; a config file path needs a '/' or the .pbtxt extension)");
}

DmaTiming dma_timing_from_name(const std::string& name) {
  if (name == "request") return DmaTiming::PerRequest;
  if (name == "step") return DmaTiming::PerStep;
  if (name == "window") return DmaTiming::PerWindow;
  throw ConfigError("the DMA timing is 'request', 'step' or 'window', not '" + name + "'");
}

ChipConfig parse_chip_config(const std::string& text, const std::string& source_name, const std::vector<std::string>& overrides) {
  pb::ChipConfig message;
  google::protobuf::TextFormat::ParseInfoTree locations;
  config_detail::parse_text(text, source_name, &message, &locations);
  config_detail::apply_overrides(&message, overrides);
  try {
    config_detail::validate(message, locations, source_name);
  } catch (const ConfigError& e) {
    if (overrides.empty()) throw;
    // A field that was set is reported where the file wrote it (or at the top, if it did not): say so.
    std::string settings;
    for (const std::string& setting : overrides) settings += (settings.empty() ? "" : " ") + setting;
    throw ConfigError(std::string(e.what()) + "\n(with --set " + settings + ")");
  }
  return config_detail::to_typed(message);
}

std::vector<std::pair<std::string, std::string>> chip_config_fields(const ChipConfig& config) {
  return config_detail::flatten_config(config_detail::to_proto(config));
}

}  // namespace npu::sim
