// The static check of a compiled student object, before it is linked into the gate binary.
//
// The student's object shares its process with the gates, so a symbol it defines can replace one the gates use
// (a libc, libstdc++, CUDA runtime, cuBLAS or labkit function: symbol interposition), and a function it calls can
// reach what decides the verdict (dlsym to find the gates' functions, mprotect to patch them, setenv to change
// what the gates read, a raw system call that no symbol shows). What an object may define and use is one table
// (kSymbolRules in objcheck.cpp, each entry with its reason); the grader reads `nm -P` and `objdump -d` of the
// object and refuses it (status `refused`) with a message naming each symbol and why.
//
// This is a static check of what the object says it defines and calls. It does not stop code that finds the
// gates' memory by other means (pointer arithmetic from a known address) and writes it while it is writable;
// docs/instructor-guide.md ("Security") lists what holds and what does not.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace labgrade {

struct ObjSymbol {
  std::string name;  // as in the object (mangled)
  char type = '?';   // nm's letter: T, W, U, ...
  bool defined() const;
  bool global() const;  // visible to the linker outside the object (strong, weak or unique global)
  bool weak() const;
};

// `nm -P` (POSIX format: "name type [value size]") of one object.
std::vector<ObjSymbol> parse_nm_posix(const std::string& text);

// The first name of a mangled C++ symbol: "lab01" for lab01::matmul(...), "std" for std:: and its abbreviations,
// "labkit" for `vtable for labkit::X`; the identifier itself for a global-scope name (with is_global_scope), and
// "" when the symbol is not a mangled C++ name (a C symbol) or cannot be read.
std::string top_level_name(const std::string& mangled, bool* is_global_scope = nullptr);

// The human-readable form of a symbol (itself when it is not a C++ name).
std::string demangle(const std::string& name);

struct ObjPolicy {
  std::string lab_namespace;  // "lab01": what the submission implements (labs/NN_topic/<topic>.h)
  // Symbols exported by the shared libraries the gate binary loads (libstdc++, cudart, cuBLAS...): a weak
  // definition of one of them in the object would replace the library's for the whole process.
  std::set<std::string> shared_exports;
  // Symbols the gate binary's own objects and static libraries (labkit, Catch2) define. They are linked before the
  // student's objects, so a template instance both define is the gates' copy; a library's template instance that
  // the object defines and they do not would be the object's own (see check_symbols).
  std::set<std::string> gate_defines;
  bool gate_defines_known = false;
};

struct ObjFinding {
  std::string symbol;  // demangled
  std::string reason;
};

// Every symbol the object defines or uses against the policy and the rule table.
std::vector<ObjFinding> check_symbols(const std::vector<ObjSymbol>& symbols, const ObjPolicy& policy);

// Raw system-call instructions in the host code of `objdump -d` output ("function: syscall").
std::vector<ObjFinding> find_raw_syscalls(const std::string& objdump_text);

// The bytes of a system-call instruction (0f 05, 0f 34, cd 80) inside another instruction of the host code, one
// finding per function: objdump decodes linearly, so `jmp 1f+1` into a `mov` immediate runs a syscall that
// find_raw_syscalls cannot see. A constant can hold the same bytes, so the grader does not refuse for this: it notes
// the file for the instructor to read (a lab note starting with kObjectReviewNote, listed in report.md).
std::vector<ObjFinding> find_hidden_syscalls(const std::string& objdump_text);

// Code that runs before main(), ahead of the gates' start-up (labkit's constructor that closes /proc to writes), or
// after their end: `objdump -h` sections .preinit_array, prioritised constructors (.init_array.NNNNN, .ctors*),
// .init and .fini (spliced into the program's _init/_fini), .fini_array and .dtors. An object's plain static
// initialisers (.init_array) run after labkit's and stay allowed.
std::vector<ObjFinding> find_early_code(const std::string& objdump_headers);

// CCCL's algorithm libraries among the headers a student file included (the compiler's dependency list, `-MD`):
// "thrust" and/or "cub", each with the first such header, for each library the file's gates do not allow
// (`allowed`: rubric names; thrust allows CUB too, as Thrust's algorithms run CUB's). Their kernels compile into the
// student's own object, where CCCL's own switch (THRUST_CUB_WRAPPED_NAMESPACE, or a macro named cub) renames them
// into the lab's namespace: the launch recorder, which must go by names, cannot tell them from the student's. The
// headers a file included cannot be renamed.
std::vector<ObjFinding> find_library_headers(const std::string& depfile_text, const std::set<std::string>& allowed);

// The gate message of a refused object (at most max_items findings listed).
std::string describe_refusal(const std::string& source, const std::vector<ObjFinding>& findings,
                             std::size_t max_items = 12);

// `nm -D --defined-only -P` of each shared library: the names it exports (versions stripped), by library. Each
// library once and up to `jobs` nm processes at a time: a batch's labs share most of theirs (cuBLAS, the CUDA
// runtime, libstdc++), and one lab after another, nm after nm, took 4 s of a batch's start on an H100 machine.
std::map<std::string, std::set<std::string>> exported_symbols_each(const std::vector<std::string>& shared_libraries,
                                                                   const std::string& nm, int jobs);

// `nm -P --defined-only` of objects and static libraries: the global names each defines (for gate_defines), each
// file once. Throws UserError when nm cannot read one (the check would be weaker without it).
std::map<std::string, std::set<std::string>> defined_symbols_each(const std::vector<std::string>& files,
                                                                  const std::string& nm, int jobs);

}  // namespace labgrade
