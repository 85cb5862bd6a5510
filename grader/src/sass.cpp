#include "sass.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <future>
#include <system_error>
#include <vector>

#include "objcheck.h"  // demangle
#include "runner_internal.h"
#include "util.h"

namespace labgrade {

namespace {

// Shared-memory loads: LDS (any width), LDSM (ldmatrix). A tile staged with cp.async (LDGSTS) or plain stores (STS)
// is still read back with one of these.
const std::set<std::string> kSharedLoads = {"LDS", "LDSM"};

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 4; ++i) out += (i ? ", " : "") + demangle(names[i]);
  if (names.size() > 4) out += " and " + std::to_string(names.size() - 4) + " more";
  return out;
}

std::string join_set(const std::vector<std::string>& v, const char* last) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? last : ", ") + v[i];
  return out;
}

}  // namespace

SassOpcodes parse_sass(const std::string& text) {
  const auto opcode_char = [](char c) {
    return std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  SassOpcodes out;
  std::set<std::string>* current = nullptr;
  std::string arch = "?";  // code before any "arch =" line (not written by cuobjdump) is kept under "?"
  const auto rest_of = [](const std::string& line, std::size_t from) {
    std::string v = line.substr(from);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.pop_back();
    return v;
  };
  for (const std::string& line : split_lines(text)) {
    if (const std::size_t a = line.find("arch = "); a != std::string::npos && line.find("/*") == std::string::npos) {
      arch = rest_of(line, a + 7);
      current = nullptr;
      continue;
    }
    const std::size_t f = line.find("Function : ");
    if (f != std::string::npos) {
      const std::string name = rest_of(line, f + 11);
      current = nullptr;
      if (!name.empty()) {
        KernelCode& k = out[name][arch];
        ++k.bodies;
        current = &k.opcodes;
      }
      continue;
    }
    // "        /*0080*/                   @!P0 LDS.U.128 R4, [R2+0x10] ;   /* 0x... */"
    const std::size_t open = line.find("/*");
    if (!current || open == std::string::npos) continue;
    const std::size_t close = line.find("*/", open + 2);
    if (close == std::string::npos || close == open + 2) continue;
    bool address = true;  // the first comment holds the instruction's address: hex digits only
    for (std::size_t k = open + 2; k < close; ++k)
      address = address && std::isxdigit(static_cast<unsigned char>(line[k]));
    if (!address) continue;
    std::size_t k = close + 2;
    auto next_token = [&] {
      while (k < line.size() && (line[k] == ' ' || line[k] == '\t' || line[k] == '{')) ++k;
      const std::size_t b = k;
      while (k < line.size() && line[k] != ' ' && line[k] != '\t' && line[k] != ';') ++k;
      return line.substr(b, k - b);
    };
    std::string op = next_token();
    if (!op.empty() && op[0] == '@') op = next_token();  // a predicate: @P0, @!PT
    op = op.substr(0, op.find('.'));
    if (!op.empty() && std::all_of(op.begin(), op.end(), opcode_char)) current->insert(op);
  }
  return out;
}

namespace {

enum class Holds { yes, no, unknown };

// What a kernel's code shows about `ops`, read in the architectures `archs` allows (empty: all of them).
Holds kernel_holds(const SassOpcodes& code, const std::string& kernel, const std::set<std::string>& ops,
                   const std::vector<std::string>& archs) {
  const auto it = code.find(kernel);
  if (it == code.end()) return Holds::unknown;
  bool judged = false, calls = false;
  for (const auto& [arch, k] : it->second) {
    std::string base = arch;  // "sm_90a" counts as "sm_90"
    while (!base.empty() && std::isalpha(static_cast<unsigned char>(base.back()))) base.pop_back();
    if (!archs.empty() && std::find(archs.begin(), archs.end(), base) == archs.end()) continue;
    if (k.bodies != 1) return Holds::unknown;
    judged = true;
    if (std::any_of(ops.begin(), ops.end(), [&](const std::string& op) { return k.opcodes.count(op) > 0; }))
      return Holds::yes;
    calls = calls || k.opcodes.count("CALL") > 0;
  }
  return !judged || calls ? Holds::unknown : Holds::no;
}

// The same for a list of kernels: yes when one of them holds one of `ops`, no when every one is known to lack them,
// unknown otherwise (nothing listed, or a kernel that cannot be judged).
Holds list_holds(const SassOpcodes& code, const std::vector<std::string>& kernels, const std::set<std::string>& ops,
                 const std::vector<std::string>& archs) {
  if (kernels.empty()) return Holds::unknown;
  Holds all = Holds::no;
  for (const std::string& k : kernels) {
    const Holds h = kernel_holds(code, k, ops, archs);
    if (h == Holds::yes) return Holds::yes;
    if (h == Holds::unknown) all = Holds::unknown;
  }
  return all;
}

}  // namespace

std::optional<std::string> judge_instructions(const GateResult& g, const SassOpcodes& code,
                                              const std::set<std::string>& other_kernels) {
  auto listed = [&](const char* list) {
    const auto it = g.names.find(list);
    return it == g.names.end() ? std::vector<std::string>{} : it->second;
  };
  std::optional<std::string> verdict;
  if (g.needs_shared_memory) {
    const std::vector<std::string> kernels = listed("shared_memory_kernels");
    const Holds h = list_holds(code, kernels, kSharedLoads, {});
    if (h == Holds::no)
      return "the kernel(s) of yours that ran with shared memory never read it: their machine code (cuobjdump "
             "--dump-sass) has no shared-memory load (LDS): " +
             list_names(kernels) +
             ". Shared memory requested at launch, or written and never read, is not a tile: this step stages its "
             "operands in shared memory and reads them from there (index the __shared__ array itself: a tile read "
             "through a pointer the compiler cannot place in shared memory becomes a generic load, LD)";
    if (h == Holds::yes) verdict = "";
  }
  if (!g.needs_instructions.empty()) {
    const std::vector<std::string> kernels = listed("step_kernels");
    const std::set<std::string> wanted(g.needs_instructions.begin(), g.needs_instructions.end());
    const Holds h = list_holds(code, kernels, wanted, g.instruction_archs);
    if (h == Holds::no)
      return "no kernel of yours that the gate's calls ran holds " + join_set(g.needs_instructions, " or ") +
             " in its machine code (cuobjdump --dump-sass): " + list_names(kernels) +
             ". The values are right, but this step is about those instructions, and a kernel without them (an "
             "earlier step's) is not it";
    if (h == Holds::yes) verdict = "";
  }
  if (!g.forbid_instructions.empty()) {
    // Any kernel of the list that holds one fails the gate, in the code for any architecture and whichever of a
    // name's bodies holds it (all of them are the lab's code of the student's). A kernel that calls functions (a
    // __noinline__ helper could hold the instruction) brings in every function of the dump: a device function has
    // no host symbol, so the object check never saw its name, and it may sit in any namespace. (The labs that
    // forbid an instruction have none of it in the gates' own code.) A kernel absent from the dump leaves the gate
    // unjudged.
    const std::vector<std::string> kernels = listed("step_kernels");
    std::vector<std::string> read = kernels;
    bool all_read = !kernels.empty(), calls = false;
    for (const std::string& kernel : kernels) {
      const auto it = code.find(kernel);
      if (it == code.end()) {
        all_read = false;
        continue;
      }
      calls = calls || std::any_of(it->second.begin(), it->second.end(),
                                   [](const auto& a) { return a.second.opcodes.count("CALL") > 0; });
    }
    if (calls)
      for (const auto& [name, archs] : code)
        if (std::find(read.begin(), read.end(), name) == read.end() && !other_kernels.count(name))
          read.push_back(name);
    for (const std::string& function : read) {
      const auto it = code.find(function);
      if (it == code.end()) continue;
      for (const auto& [arch, k] : it->second)
        for (const std::string& op : g.forbid_instructions)
          if (k.opcodes.count(op))
            return std::string(std::find(kernels.begin(), kernels.end(), function) != kernels.end()
                                   ? "a kernel of yours that the gate's calls ran"
                                   : "a function of the gate binary that a kernel of yours the gate's calls ran "
                                     "may call (it calls functions)") +
                   " holds " + op + " in its machine code for " + arch + " (cuobjdump --dump-sass): " +
                   demangle(function) + ". The values are within the tolerance, but this step is about the plain " +
                   "arithmetic units, and " + join_set(g.forbid_instructions, " or ") +
                   " (tensor-core instructions) are not allowed in it";
    }
    if (all_read && !verdict) verdict = "";
  }
  return verdict;
}

bool needs_machine_code(const LabResult& lab) {
  return std::any_of(lab.gates.begin(), lab.gates.end(),
                     [](const GateResult& g) {
                       return g.needs_shared_memory || !g.needs_instructions.empty() ||
                              !g.forbid_instructions.empty();
                     });
}

SassDump dump_sass(const fs::path& exe, const SassRunner& run) {
  SassDump d;
  const auto started = std::chrono::steady_clock::now();
  const auto cuobjdump = find_program("cuobjdump", {"/usr/local/cuda/bin"});
  if (!cuobjdump) {
    d.why_not = "cuobjdump was not found (it comes with the CUDA toolkit)";
    return d;
  }
  // The whole binary: which kernels the gates ran is known only after the run, and the dump starts with it. Lab
  // 04's (Thrust's sorts) is 13 MB of text, 6.8 s on an H200 machine, all of it beside the lab's untimed gates.
  const CommandResult r = run({cuobjdump->string(), "--dump-sass", exe.string()}, 300);
  if (r.output.size() > kSassDumpLimit)  // the rest is not kept (a batch's file-size limit may also have ended it)
    d.why_not = "cuobjdump's dump of the gate binary is over 64 MiB";
  else if (r.exit_code != 0)
    d.why_not = "cuobjdump --dump-sass failed (" +
                (r.timed_out ? std::string("it timed out") : trim_message(r.output, 2, 200)) + ")";
  else
    d.code = parse_sass(r.output);
  d.review = !d.code;
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return d;
}

namespace {
// cuobjdump as the grader's user, on `cpus`. run_command keeps 64 MiB of output, so a longer dump arrives as exactly
// that much: marked as over the limit.
SassRunner run_directly(std::vector<int> cpus) {
  return [cpus = std::move(cpus)](const std::vector<std::string>& argv, double timeout_s) {
    CommandResult r = run_command(argv, timeout_s, {}, false, cpus);
    if (r.output.size() >= kSassDumpLimit) r.output.resize(kSassDumpLimit + 1);
    return r;
  };
}
}  // namespace


std::shared_future<SassDump> start_sass_dump(const fs::path& exe, SassRunner run) {
  auto dump = [exe, run = std::move(run)] { return dump_sass(exe, run); };
  try {
    return std::async(std::launch::async, dump).share();
  } catch (const std::system_error&) {  // no thread to be had: dump when the result is asked for
    return std::async(std::launch::deferred, dump).share();
  }
}

std::shared_future<SassDump> start_sass_dump(const fs::path& exe, const std::vector<int>& cpus) {
  return start_sass_dump(exe, run_directly(cpus));
}

InstructionFindings find_instructions(const std::vector<GateResult>& gates_in, const SassDump& dump, bool hidden) {
  InstructionFindings found;
  found.hidden = hidden;
  bool listed = false;
  std::vector<const GateResult*> gates;
  for (const auto& g : gates_in) {
    if (g.hidden != hidden || g.status != Status::passed) continue;
    if (!g.needs_shared_memory && g.needs_instructions.empty() && g.forbid_instructions.empty()) continue;
    gates.push_back(&g);
    for (const char* list : {"shared_memory_kernels", "step_kernels"})
      if (auto it = g.names.find(list); it != g.names.end() && !it->second.empty()) listed = true;
  }
  if (gates.empty() || !listed) return found;
  if (!dump.code) {
    found.note = (dump.review ? std::string(kObjectReviewNote) : std::string()) +
                 "machine-code checks not done: " + dump.why_not;
    return found;
  }
  int checked = 0, unjudged = 0;
  for (const GateResult* g : gates) {
    std::set<std::string> others;  // kernels the lab's other gates recorded (not device functions)
    for (const auto& o : gates_in)
      if (&o != g)
        for (const char* list : {"shared_memory_kernels", "step_kernels"})
          if (auto it = o.names.find(list); it != o.names.end()) others.insert(it->second.begin(), it->second.end());
    for (const char* list : {"shared_memory_kernels", "step_kernels"})
      if (auto it = g->names.find(list); it != g->names.end())
        for (const auto& k : it->second) others.erase(k);
    const std::optional<std::string> v = judge_instructions(*g, *dump.code, others);
    if (!v) {
      ++unjudged;
      continue;
    }
    ++checked;
    if (!v->empty()) found.failures.emplace_back(g->id, *v);
  }
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", dump.seconds);
  found.note = "machine code: " + std::to_string(checked) + (hidden ? " hidden" : "") +
               " gate(s) checked for the instructions their step is about (cuobjdump, " + took + ")";
  if (!found.failures.empty()) found.note += ", " + std::to_string(found.failures.size()) + " failed";
  if (unjudged)
    found.note += "; " + std::to_string(unjudged) +
                  " not judged (a kernel's code not in the binary for a GPU the check reads, named in several files, "
                  "or calling other functions)";
  return found;
}

void apply_instructions(LabResult& lab, const InstructionFindings& found) {
  for (const auto& [id, message] : found.failures)
    for (auto& g : lab.gates)
      if (g.id == id && g.hidden == found.hidden && g.status == Status::passed) {
        g.status = Status::failed;
        g.message = message;
      }
  if (!found.note.empty()) detail::add_note(lab, found.note);
}

}  // namespace labgrade
