// The machine code of the kernels a gate's recorded calls ran, for what values cannot show.
//
// A correctness gate checks values, and the launch recorder (labkit/launches.h) checks which kernels ran and whether
// they had shared memory. Neither tells what a kernel's code does: lab 01's naive kernel launched with a few bytes of
// dynamic shared memory it never touches counts as "using shared memory", and step 6's kernel submitted as lab 06's
// step 7a (fp64 tensor cores) gives the same exact answers. After the graded run the grader reads the SASS of those
// kernels from the gate binary (`cuobjdump --dump-sass`) and looks for the instructions the step is about:
//   - needs_shared_memory: a kernel of the gate's "shared_memory_kernels" loads from shared memory (LDS, LDSM);
//   - needs_instructions: a kernel of the gate's "step_kernels" found in the binary holds one of the listed opcodes,
//     judged only in the code for the rubric's instruction_archs where it lists them (fp64 tensor cores exist on
//     sm_80, sm_90 and sm_100, not on the GPUs between, where the compiler may build mma.sync .f64 otherwise).
// A gate that passed and fails this becomes failed, with the kernels named. What cannot be judged (no cuobjdump, no
// kernel of the list in the binary's SASS: code only as PTX, or a library's) is left as it is, with a lab note.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scoring.h"
#include "util.h"

namespace labgrade {

// Kernel (as named in the SASS: mangled, the name CUPTI reports) -> architecture ("sm_90", as the dump's
// "arch = sm_90" line names the code that follows) -> the opcodes its code for that architecture holds, without
// modifiers ("LDS" for "LDS.U.128", "DMMA" for "DMMA.884"), and how many bodies of that name the dump holds for it:
// each source file is its own code object, and two files may define kernels of one name (static kernels, which the
// device names without the file), so a name dumped twice cannot say which of them ran.
struct KernelCode {
  std::set<std::string> opcodes;
  int bodies = 0;
};
using SassOpcodes = std::map<std::string, std::map<std::string, KernelCode>>;

// The `cuobjdump --dump-sass` text of a binary, parsed: "arch = sm_NN" starts an architecture's code, "Function :
// NAME" a kernel, and each instruction line "/*0080*/  @!P0 LDS.U.128 R4, [R2] ;" gives its opcode.
SassOpcodes parse_sass(const std::string& cuobjdump_text);

// One gate against its rubric's needs and the parsed code: nullopt when the gate has nothing to check or it cannot
// be judged; else "" when it holds what it needs, or the failure's message. A gate fails only when every kernel of
// its list is known to lack what it needs: in the dump, for an architecture the check reads, under a name with one
// body there, and calling no other function (a callee's code, which `--function` does not dump, could hold it).
std::optional<std::string> judge_instructions(const GateResult& g, const SassOpcodes& code);

// After a lab's graded run (the gates of one visibility, as run_and_score runs them): reads the SASS of the listed
// kernels from `exe` and fails the passed gates whose kernels lack what they need; notes what could not be checked.
// In two halves, so that cuobjdump (seconds on a large gate binary: lab 01's 7.4 s beside the other labs on one
// H200, all of it between the lab's graded run and its memory and race checks) runs beside those checks:
// find_instructions reads a copy of the gates and the binary (no LabResult, so another thread may run it), and
// apply_instructions fails the gates it found lacking that are still passed and adds its note.
struct InstructionFindings {
  bool hidden = false;
  std::vector<std::pair<std::string, std::string>> failures;  // gate id, message
  std::string note;                                           // "" when no gate needed a check
};
InstructionFindings find_instructions(const std::vector<GateResult>& gates, const fs::path& exe, bool hidden);
void apply_instructions(LabResult& lab, const InstructionFindings& found);
void check_instructions(LabResult& lab, const fs::path& exe, bool hidden);  // both, one after the other

}  // namespace labgrade
