// npusim._C: the Python face of the bridge (npusim/__init__.py wraps it).
#include <torch/csrc/utils/pybind.h>

#include "npusim/firmware/counters.h"
#include "runtime.h"

// libsystemc.so refers to sc_main; Python owns main.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char*[]) { return 0; }

PYBIND11_MODULE(_C, m) {
  m.doc() = "npusim: the simulated NPU as a PyTorch device";
  m.def("init", &npusim::Runtime::configure, "Chooses the chip config and trace file; False once the device is open.",
        pybind11::arg("config"), pybind11::arg("trace"));
  m.def("is_initialized", &npusim::Runtime::started);
  m.def("synchronize", [] { npusim::Runtime::get().synchronize(); });
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
  m.def("report", [] { return npusim::Runtime::get().device().report(); });
  m.def("write_trace", [] {
    if (npusim::Runtime::started()) npusim::Runtime::get().write_trace();
  });
  // The device's counters now (after everything launched so far): chip-wide, and summed over the cores.
  m.def("device_counters", [] {
    npusim::Runtime& runtime = npusim::Runtime::get();
    runtime.synchronize();
    npu::Device& device = runtime.device();
    std::vector<uint64_t> words;
    device.queue(device.info().num_queues - 1).snapshot_counters(&words);
    const npu::firmware::CounterSnapshot snapshot = npu::firmware::decode_counter_snapshot(words.data(), words.size());
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
    return counters;
  });
  m.def("num_cores", [] { return npusim::Runtime::get().device().info().num_cores; });
}
