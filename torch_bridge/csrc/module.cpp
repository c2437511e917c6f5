// npusim._C: the Python face of the bridge (npusim/__init__.py wraps it).
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "npusim/common/output_files.h"
#include "npusim/deploy/generate.h"
#include "npusim/deploy/package.h"
#include "npusim/sim/chip_peaks.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/energy.h"
#include "runtime/generator.h"
#include "aten/aten_table.h"
#include "runtime/runtime.h"

// libsystemc.so refers to sc_main; Python owns main.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char*[]) { return 0; }

namespace {

// A config for Python callers that name one: a refused config is a ValueError carrying the loader's message.
npu::sim::ChipConfig load_config_or_value_error(const std::string& config, const std::vector<std::string>& overrides) {
  try {
    return npu::sim::load_chip_config(config, overrides);
  } catch (const npu::sim::ConfigError& e) {
    throw pybind11::value_error(e.what());
  }
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "npusim: the simulated NPU as a PyTorch device";
  // (Here, after every kernel registered by hand at load: those take precedence.)
  npusim::register_table_ops();
  m.def("table_ops", [] {
    const npusim::TableRegistrations r = npusim::register_table_ops();
    return std::map<std::string, std::vector<std::string>>{{"table", r.table}, {"derived", r.derived}};
  }, "The ATen overloads registered without a kernel written for them: {'table': compiler/ops.def's elementwise rows' "
     "functional overloads, 'derived': in-place and out= forms of ops with a functional npu kernel}.");
  // A Python exception carried through C++ (Ctrl-C during a wait: raise_driver_error) is raised as itself.
  pybind11::register_local_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (python_error& e) {
      e.restore();
    }
  });
  m.def("init", &npusim::Runtime::configure, "Chooses the chip config and trace file; False once the device is open.",
        pybind11::arg("config"), pybind11::arg("trace"), pybind11::arg("timing_only") = false, pybind11::arg("sram_pool_bytes") = npusim::Runtime::kDefaultSramPool,
        pybind11::arg("dma_timing") = "");
  m.def("set_sram_placement", &npusim::Runtime::set_sram_placement,
        "While on (this thread), new npu memory comes from the cores' SRAM pools where one has room; returns the previous setting.");
  m.def("sram_stats", [] {
    npu::Device& device = npusim::Runtime::get().device();
    const npu::AllocatorStats s = device.sram_stats();
    return std::map<std::string, double>{{"pool_bytes_per_core", double(device.info().sram_pool_bytes_per_core)},
                                         {"num_cores", double(device.info().num_cores)},
                                         {"allocated_bytes", double(s.in_use_bytes)},
                                         {"peak_allocated_bytes", double(s.peak_in_use_bytes)},
                                         {"allocations", double(s.allocations)},
                                         {"total_allocations", double(s.total_allocations)}};
  });
  m.def("is_initialized", &npusim::Runtime::started);
  m.def("in_bad_fork", &npusim::Runtime::in_bad_fork, "Whether the device was opened before this process was forked (and so cannot be used here).");
  m.def("default_generator", [] { return npusim::default_npu_generator(); }, "The npu's default torch.Generator (seed and counter offset).");
  m.def("synchronize", [] { npusim::Runtime::get().synchronize(); }, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("fallback_stats", [] { return npusim::Runtime::get().fallback_stats(); });
  m.def("kernel_stats", [] { return npusim::Runtime::get().kernel_stats(); });
  m.def("memory_stats", [] {
    const npu::AllocatorStats s = npusim::Runtime::get().device().memory_stats();
    return std::map<std::string, double>{{"allocated_bytes", double(s.in_use_bytes)},
                                         {"peak_allocated_bytes", double(s.peak_in_use_bytes)},
                                         {"free_bytes", double(s.free_bytes)},
                                         {"largest_free_bytes", double(s.largest_free_bytes)},
                                         {"allocations", double(s.allocations)},
                                         {"total_allocations", double(s.total_allocations)},
                                         {"total_frees", double(s.total_frees)},
                                         {"fragmentation", s.fragmentation}};
  });
  m.def("empty_cache", [] { return npusim::Runtime::started() ? npusim::Runtime::get().unload_programs() : uint64_t{0}; }, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("reset_peak_memory_stats", [] { npusim::Runtime::get().device().reset_peak_memory_stats(); });
  m.def("memory_total_bytes", [] {
    const npu::DeviceInfo& info = npusim::Runtime::get().device().info();
    return info.memory_bytes - info.reserved_bytes;
  });
  m.def("report", [] { return npusim::Runtime::get().device().report(); }, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def(
      "write_trace",
      [](const std::string& path) {
        if (npusim::Runtime::started()) npusim::Runtime::get().write_trace(path);
      },
      pybind11::arg("path") = "", pybind11::call_guard<pybind11::gil_scoped_release>());
  // The device's counters now (after everything launched so far): chip-wide, and summed over the cores.
  m.def("device_counters", [] {
    npusim::Runtime& runtime = npusim::Runtime::get();
    npu::firmware::CounterSnapshot snapshot;
    {
      pybind11::gil_scoped_release release;  // (it waits for the device)
      runtime.synchronize();
      snapshot = runtime.device().read_counters();
    }
    std::map<std::string, uint64_t> counters = {{"cycle", snapshot.cycle},
                                                {"dram_read_bytes", snapshot.dram_read_bytes},
                                                {"dram_write_bytes", snapshot.dram_write_bytes},
                                                {"instructions", 0},
                                                {"macs", 0},
                                                {"tensor_busy_cycles", 0},
                                                {"vector_busy_cycles", 0},
                                                {"dma_busy_cycles", 0}};
    for (const npu::firmware::CoreCounters& core : snapshot.cores) {
      counters["instructions"] += core.instructions, counters["macs"] += core.macs;
      counters["tensor_busy_cycles"] += core.tensor_busy_cycles, counters["vector_busy_cycles"] += core.vector_busy_cycles;
      counters["dma_busy_cycles"] += core.dma_busy_cycles;
    }
    // The energy model's action counts, from the same snapshot (a second read would move the device's time).
    for (size_t i = 0; i < npu::sim::kNumActions; ++i)
      counters["action." + npu::sim::action_name(static_cast<npu::sim::Action>(i))] = snapshot.actions[i];
    return counters;
  });
  // Prices action counts ("action.component.action" keys, as device_counters names them) over `cycles` with
  // this device's config: energy per component, power, area (npusim.profile's energy).
  m.def("price_energy", [](const std::map<std::string, uint64_t>& counters, uint64_t cycles) {
    const npu::sim::ChipConfig& config = npusim::Runtime::get().device_chip();
    npu::sim::ActionCounts counts{};
    for (size_t i = 0; i < npu::sim::kNumActions; ++i) {
      const auto it = counters.find("action." + npu::sim::action_name(static_cast<npu::sim::Action>(i)));
      if (it != counters.end()) counts[i] = it->second;
    }
    const npu::sim::EnergyModel model = npu::sim::energy_model(config);
    const npu::sim::EnergyReport report = npu::sim::price(model, counts, cycles, config.clock_mhz);
    pybind11::dict components;
    for (const npu::sim::ComponentEnergy& c : report.components) {
      pybind11::dict row;
      row["dynamic_pj"] = static_cast<double>(c.dynamic_fj) / 1000.0;
      row["leakage_pj"] = c.leakage_pj;
      row["total_pj"] = c.total_pj();
      row["area_mm2"] = c.area_mm2;
      components[c.name.c_str()] = row;
    }
    pybind11::dict result;
    result["total_pj"] = report.total_pj;
    result["dynamic_pj"] = static_cast<double>(report.dynamic_fj()) / 1000.0;
    result["leakage_pj"] = report.leakage_pj();
    result["seconds"] = report.seconds;
    result["average_power_w"] = report.average_power_w;
    result["peak_power_w"] = report.peak_power_w;
    result["area_mm2"] = report.area_mm2;
    result["components"] = components;
    return result;
  });
  m.def("begin_capture", [](const std::string& source) { npusim::Runtime::get().begin_capture(source); });
  m.def("begin_capture_method", [](const std::string& method, const std::vector<at::Tensor>& inputs, const std::vector<std::string>& names,
                                   const std::vector<at::Tensor>& state) { npusim::Runtime::get().begin_capture_method(method, inputs, names, state); },
        pybind11::arg("method"), pybind11::arg("inputs"), pybind11::arg("names"), pybind11::arg("state") = std::vector<at::Tensor>{},
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("end_capture_method", [](const std::vector<at::Tensor>& outputs, const std::vector<std::string>& names) {
    npusim::Runtime::get().end_capture_method(outputs, names);
  }, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("end_capture", [](const std::string& path) { return npusim::Runtime::get().end_capture(path); },
        pybind11::call_guard<pybind11::gil_scoped_release>());
  // A file written whole or not at all, never over what is not a regular file (npusim.export.save_raw).
  m.def("write_file", [](const std::string& path, const pybind11::bytes& data) {
    const std::string bytes = data;
    pybind11::gil_scoped_release release;
    try {
      npu::write_file_atomically(path, bytes);
    } catch (const npu::OutputFileError& e) {
      TORCH_CHECK(false, "npusim: ", e.what());
    }
  });
  m.def("abort_capture", [] { npusim::Runtime::get().abort_capture(); });
  // The package, read and checked against this process's chip config.
  const auto read_package = [](const std::string& path) {
    npusim::Runtime& runtime = npusim::Runtime::get();
    npu::deploy::Package package;
    try {
      package = npu::deploy::Package::read(path);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "npusim: ", e.what());
    }
    TORCH_CHECK(package.config_text() == npu::sim::dump_chip_config(npu::sim::load_chip_config(runtime.config_name())),
                "npusim: ", path, " was compiled for chip config '", package.config_name(), "', this process's device is '",
                runtime.config_name(), "'");
    return package;
  };
  // npu-run --generate's loop (npusim/deploy/generate.h) on this process's device: (new tokens, cycles of each run).
  m.def("generate_package", [read_package](const std::string& path, const std::vector<int64_t>& prompt, int64_t new_tokens) {
    pybind11::gil_scoped_release release;  // (it waits for the device)
    const npu::deploy::Package package = read_package(path);
    try {
      npu::deploy::PackageRunner runner(npusim::Runtime::get().shared_device(), package);
      const npu::deploy::GenerateResult result = npu::deploy::generate(runner, package, prompt, new_tokens);
      return std::make_pair(result.tokens, result.cycles_per_run);
    } catch (const npu::Error& e) {
      npusim::raise_driver_error(e);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "npusim: ", e.what());
    }
  });
  // Runs a package on this process's device (what npu-run does in a process of its own).
  m.def("run_package", [read_package](const std::string& path, const std::vector<pybind11::bytes>& inputs, const std::string& method) {
    npusim::Runtime& runtime = npusim::Runtime::get();  // the runner waits for earlier work itself
    std::vector<std::vector<uint8_t>> data;
    for (const pybind11::bytes& b : inputs) {
      const std::string s = b;
      data.emplace_back(s.begin(), s.end());
    }
    npu::deploy::PackageRunner::Result result;
    {
      pybind11::gil_scoped_release release;  // (it waits for the device)
      const npu::deploy::Package package = read_package(path);
      try {
        result = npu::deploy::PackageRunner(runtime.shared_device(), package).run(method.empty() ? 0 : package.method(method), data);
      } catch (const npu::Error& e) {
        npusim::raise_driver_error(e);
      } catch (const std::exception& e) {
        TORCH_CHECK(false, "npusim: ", e.what());
      }
    }
    std::vector<pybind11::bytes> outputs;
    for (const auto& o : result.outputs) outputs.emplace_back(reinterpret_cast<const char*>(o.data()), o.size());
    return std::make_pair(outputs, result.cycles);
  });
  // A package's signature: {"methods": {name: {"inputs": [(name, dtype, shape)], "outputs": [...]}}, "inputs" and "outputs" of
  // the first method, "summary": text, ...}.
  m.def("package_info", [](const std::string& path) {
    npu::deploy::Package package;
    try {
      package = npu::deploy::Package::read(path);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "npusim: ", e.what());
    }
    const auto specs = [](const std::vector<npu::deploy::TensorSpec>& list) {
      pybind11::list out;
      for (const auto& t : list) out.append(pybind11::make_tuple(t.name, std::string(npu::isa::dtype_name(t.dtype)), t.shape));
      return out;
    };
    pybind11::dict info, methods;
    for (size_t m = 0; m < package.methods().size(); ++m) {
      pybind11::dict method;
      method["inputs"] = specs(package.inputs(m));
      method["outputs"] = specs(package.outputs(m));
      methods[pybind11::str(package.methods()[m])] = method;
    }
    info["methods"] = methods;  // in the package's order (the first is what a run runs by default)
    info["inputs"] = specs(package.inputs());
    info["outputs"] = specs(package.outputs());
    info["summary"] = package.summary();
    info["config"] = package.config_name();
    info["launches"] = package.launches();
    info["buffers"] = package.buffer_count();
    info["logical_buffers"] = package.logical_buffer_count();
    info["planned_bytes"] = package.planned_bytes();
    return info;
  });
  m.def("begin_profile", [](const std::string& trace_path) { npusim::Runtime::get().begin_profile(trace_path); }, pybind11::arg("trace_path") = "",
        pybind11::call_guard<pybind11::gil_scoped_release>());
  // (kernel rows, host transfer rows): (scope, op, kernel, cycles, plan, start cycle, end cycle) and
  // (start cycle, end cycle, bytes, "to device" | "to host", what): what is "queue" for the driver's
  // command packets and fence counters (the reserved top of device memory), "copy" for a queue's COPY
  // packet, "data" for the host's own copies of tensors and programs.
  m.def("end_profile", [] {
    npusim::Runtime::ProfileResult result;
    uint64_t queue_memory = 0;
    {
      pybind11::gil_scoped_release release;  // (it waits for the device)
      result = npusim::Runtime::get().end_profile();
      const npu::DeviceInfo& info = npusim::Runtime::get().device().info();
      queue_memory = info.memory_bytes - info.reserved_bytes;
    }
    pybind11::list rows, transfers;
    for (const auto& k : result.kernels)
      rows.append(pybind11::make_tuple(k.scope, k.op, k.kernel, k.cycles, k.compiled ? k.compiled->plan : "", k.start_cycle, k.end_cycle));
    for (const npu::sim::HostTransfer& t : result.host_transfers)
      transfers.append(pybind11::make_tuple(t.start_cycle, t.end_cycle, t.bytes, t.to_device ? "to device" : "to host",
                                            t.by_copy_engine ? "copy" : t.address >= queue_memory ? "queue" : "data"));
    return pybind11::make_tuple(rows, transfers);
  });
  m.def("set_profile_scope", &npusim::Runtime::set_profile_scope, pybind11::arg("scope"), pybind11::arg("nodes") = "");
  m.def("tracing", [] { return npusim::Runtime::started() && npusim::Runtime::get().tracing(); });
  // What utilization is measured against.
  m.def("chip_info", [] {
    const npu::sim::ChipConfig& config = npusim::Runtime::get().device_chip();
    return std::map<std::string, double>{{"num_cores", config.num_cores},
                                         {"clock_mhz", config.clock_mhz},
                                         {"dma_channels", config.core.dma.channels},
                                         {"launch_cycles", config.command_processor.launch_cycles},
                                         {"packet_cycles", config.command_processor.packet_cycles},
                                         {"tensor_rows", config.core.tensor_core.rows},
                                         {"tensor_cols", config.core.tensor_core.cols},
                                         {"tensor_arrays", config.core.tensor_core.arrays},
                                         {"scratchpad_bytes", double(config.core.scratchpad.size_bytes)},
                                         {"macs_per_cycle", double(npu::sim::peak_macs_per_cycle(config))},
                                         {"vector_elements_per_cycle", double(npu::sim::peak_vector_elements_per_cycle(config))},
                                         {"dram_bytes_per_cycle", double(npu::sim::peak_dram_bytes_per_cycle(config))},
                                         {"host_link_bytes_per_cycle", config.host_link.bytes_per_cycle}};
  });
  m.def("num_cores", [] { return npusim::Runtime::get().device().info().num_cores; });
  // A config (preset or file) with fields set by path, validated, without opening a device (npu-sweep):
  // its effective text, every field by path, and its prices without a run (area, leakage, design peak power).
  m.def("chip_config_text", [](const std::string& config, const std::vector<std::string>& overrides) {
    return npu::sim::dump_chip_config(load_config_or_value_error(config, overrides));
  });
  m.def("chip_config_fields", [](const std::string& config, const std::vector<std::string>& overrides) {
    return npu::sim::chip_config_fields(load_config_or_value_error(config, overrides));
  });
  m.def("chip_energy_model", [](const std::string& config, const std::vector<std::string>& overrides) {
    const npu::sim::EnergyModel model = npu::sim::energy_model(load_config_or_value_error(config, overrides));
    pybind11::dict result;
    result["area_mm2"] = model.area_mm2();
    result["leakage_w"] = model.leakage_w();
    result["peak_power_w"] = model.peak_power_w;
    return result;
  });
}
