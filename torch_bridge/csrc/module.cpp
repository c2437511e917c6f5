// npusim._C: the Python face of the bridge (npusim/__init__.py wraps it).
#include <torch/csrc/utils/pybind.h>

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
  m.def("num_cores", [] { return npusim::Runtime::get().device().info().num_cores; });
}
