// The classification of the kernels a step ran: names, libraries, the binary's own symbols. The recorder that
// sees them (CUPTI) is in launches_recorder.cpp, apart, so that a program using only these (labgrade's object
// check) does not load CUPTI. See labkit/launches.h for the rules.
#include "labkit/launches.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "labkit/device.h"

namespace labkit::launches {

// ---- Names ---------------------------------------------------------------------------------------------------

std::string demangle(const std::string& mangled) {
  if (mangled.compare(0, 2, "_Z") != 0) return mangled;  // __cxa_demangle also reads "f" as the type float
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

std::string header_library(const std::string& mangled) {
  std::string d = demangle(mangled);
  // "(anonymous namespace)::" is part of a qualified name, not a parameter list.
  for (std::size_t at; (at = d.find("(anonymous namespace)")) != std::string::npos;)
    d.replace(at, 21, "anonymous_namespace");
  // The function's own qualified name ends at the first '<' or '(' outside brackets; a template function's
  // demangled name starts with its return type ("void cub::...::DeviceRadixSortOnesweepKernel<...>(...)"), so the
  // name is the last word before that point. Template arguments (a student kernel instantiated with
  // thrust::plus<float>) are never looked at.
  std::size_t end = d.size();
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] == '<' || d[i] == '(') {
      end = i;
      break;
    }
  std::string head = d.substr(0, end);
  const std::size_t space = head.rfind(' ');
  if (space != std::string::npos) head = head.substr(space + 1);
  // Anywhere in the qualified name, not only first: CCCL's THRUST_CUB_WRAPPED_NAMESPACE puts both libraries inside
  // another namespace (lab04::cub::DeviceRadixSortOnesweepKernel). A macro that renames `cub` itself hides even
  // that; the grader's object check refuses such a step by the headers it included.
  for (const char* ns : {"cub", "thrust"}) {
    const std::string part = std::string(ns) + "::";
    for (std::size_t at = head.find(part); at != std::string::npos; at = head.find(part, at + 1))
      if (at == 0 || head.compare(at - 2, 2, "::") == 0) return ns;
  }
  return "";
}

std::string library_of_file(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto starts = [&](std::string_view p) { return file.substr(0, p.size()) == p; };
  if (starts("libcublas.so") || starts("libcublasLt.so")) return "cublas";
  if (starts("libcusparse.so")) return "cusparse";
  if (starts("libnccl.so")) return "nccl";
  return "";
}

std::string library_title(std::string_view library) {
  if (library == "cublas") return "cuBLAS";
  if (library == "cusparse") return "cuSPARSE";
  if (library == "nccl") return "NCCL";
  if (library == "cub") return "CUB";
  if (library == "thrust") return "Thrust";
  return "a library (not compiled from your source)";
}

Origin classify(const Kernel& k, const Symbols& own) {
  if (std::string ns = header_library(k.name); !ns.empty()) return {ns};
  if (!k.launched_from.empty()) return {k.launched_from};
  if (!own.compiled_here(k)) return {"library"};
  return {};
}

std::string refusal(std::string_view step, const std::vector<Kernel>& ran, const std::vector<std::string>& allowed,
                    const Symbols& own) {
  // Thrust's algorithms run CUB's kernels (thrust::transform launches cub::detail::transform::transform_kernel),
  // so a step that may use Thrust may run CUB kernels too.
  auto allows = [&](const std::string& lib) {
    for (const auto& a : allowed)
      if (a == lib || (a == "thrust" && lib == "cub")) return true;
    return false;
  };
  // A step that may call cuBLAS or cuSPARSE also accepts a foreign kernel whose launch no callback attributed
  // (a library path that CUPTI's launch callbacks do not see): such a step is a library step by design, so the
  // foreign kernel gains nothing; a hand-written step never accepts one.
  const bool library_step = allows("cublas") || allows("cusparse");
  for (const Kernel& k : ran) {
    const Origin o = classify(k, own);
    if (o.own() || allows(o.library) || (o.library == "library" && library_step)) continue;
    std::string name = demangle(k.name);
    if (name.size() > 200) name = name.substr(0, 200) + "...";  // CUB's template arguments run to a page
    std::string msg = std::string(step) + " ran a kernel of " + library_title(o.library) + " (" + name + ")";
    // A name the binary has, with other code behind it: say so, with the figures that differ.
    if (o.library == "library" && own.contains(k.name))
      msg += " [a function of that name is compiled into the binary, but it is not a kernel with the code that ran: " +
             std::to_string(k.registers) + " registers, " + std::to_string(k.static_shared) +
             " bytes of static shared memory]";
    msg += ": this step must be your own kernel";
    if (!allowed.empty()) {
      msg += " (it may use ";
      for (std::size_t i = 0; i < allowed.size(); ++i) msg += (i ? ", " : "") + library_title(allowed[i]);
      msg += ")";
    }
    return msg;
  }
  return "";
}

// ---- The binary's own functions ----------------------------------------------------------------------------------

Symbols::Symbols(const std::vector<std::string>& mangled_names) {
  for (const auto& n : mangled_names) names_.insert(demangle(n));
}

Symbols::Symbols(const std::vector<std::pair<std::string, const void*>>& functions, CodeCheck check)
    : check_(std::move(check)) {
  for (const auto& [name, address] : functions) {
    std::string d = demangle(name);
    names_.insert(d);
    addresses_.emplace(std::move(d), address);
  }
}

bool Symbols::contains(const std::string& mangled_name) const { return names_.count(demangle(mangled_name)) != 0; }

bool Symbols::compiled_here(const Kernel& ran) const {
  if (!check_ || ran.registers < 0) return contains(ran.name);
  // Every function of the name (kernels with internal linkage in several files share one): one must be the code.
  const auto [first, last] = addresses_.equal_range(demangle(ran.name));
  for (auto it = first; it != last; ++it)
    if (check_(it->second, ran)) return true;
  return false;
}

std::vector<FunctionSymbol> read_functions(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    throw std::runtime_error(path + ": not an ELF file");
  }
  const std::size_t size = std::size_t(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error(path + ": cannot map: " + std::strerror(errno));
  std::unique_ptr<void, std::function<void(void*)>> guard(map, [size](void* p) { ::munmap(p, size); });
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(path + ": not a 64-bit ELF file");
  if (eh->e_shoff == 0 || eh->e_shoff + std::size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size)
    throw std::runtime_error(path + ": no section table");
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  std::vector<FunctionSymbol> functions;
  for (int pass = 0; pass < 2 && functions.empty(); ++pass) {  // .symtab (local symbols too); .dynsym if stripped
    const Elf64_Word want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
      const std::size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
      const char* str = reinterpret_cast<const char*>(base + strs.sh_offset);
      for (std::size_t s = 0; s < count; ++s) {
        // Defined functions only: an undefined reference (a cuBLAS entry point the binary calls) is not its own.
        if (ELF64_ST_TYPE(syms[s].st_info) != STT_FUNC || syms[s].st_shndx == SHN_UNDEF) continue;
        if (syms[s].st_name >= strs.sh_size) continue;
        functions.push_back({str + syms[s].st_name, syms[s].st_value});
      }
    }
  }
  return functions;
}

Symbols read_function_symbols(const std::string& path) {
  std::vector<std::string> names;
  for (auto& f : read_functions(path)) names.push_back(std::move(f.name));
  return Symbols(names);
}

}  // namespace labkit::launches
