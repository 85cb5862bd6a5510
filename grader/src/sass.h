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
#include <functional>
#include <future>
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
// body there, and calling no other function (the judge does not follow calls, and a callee's code could hold it).
// `other_kernels`: kernels the lab's other gates recorded (its other steps'), which a calling kernel's check of the
// functions it may reach (forbid_instructions) leaves out, so that one step's instruction never fails another's gate.
std::optional<std::string> judge_instructions(const GateResult& g, const SassOpcodes& code,
                                              const std::set<std::string>& other_kernels = {});

// After a lab's graded run (the gates of one visibility, as run_and_score runs them) and before its memory and race
// checks: fails the passed gates whose kernels lack what they need, from the SASS of the whole gate binary, and notes
// what could not be checked. cuobjdump takes seconds on a large binary (lab 01's 7.4 s beside the other labs on one
// H200, when it ran between the graded run and the checks), so it runs in a thread of its own: a batch starts it in
// the student's compile sandbox as soon as the lab is linked (GateRunSpec::sass), local grading when the lab's untimed
// gates start (start_sass_dump: the binary is what it reads, not which kernels ran), and the result is used after
// them: find_instructions judges a copy of the gates against the dump, apply_instructions fails those it found
// lacking and adds its note. A gate failed here is not run again under the sanitizers.
struct SassDump {
  std::optional<SassOpcodes> code;  // none: why_not says why
  std::string why_not;
  // cuobjdump was there and did not give a readable dump (it failed, timed out, or wrote over 64 MiB): a gate binary
  // crafted against the parser would look like this, so the note goes to the instructor's "object code to read".
  bool review = false;
  double seconds = 0;  // cuobjdump and the parse
};
struct InstructionFindings {
  bool hidden = false;
  std::vector<std::pair<std::string, std::string>> failures;  // gate id, message
  std::string note;                                           // "" when no gate needed a check
};
bool needs_machine_code(const LabResult& lab);  // a gate of the lab's rubric has needs_shared_memory or _instructions
// How cuobjdump is run: argv and a time limit in, its exit, output (at most kSassDumpLimit + 1 bytes of it) and
// whether it timed out back. cuobjdump parses the linked gate binary, which holds the student's objects: a batch runs
// it in the sandbox of the student's compiles (batch.cpp), local grading (one's own tree) directly.
using SassRunner = std::function<CommandResult(const std::vector<std::string>& argv, double timeout_s)>;
inline constexpr std::size_t kSassDumpLimit = std::size_t(64) << 20;  // 64 MiB of text
SassDump dump_sass(const fs::path& exe, const SassRunner& run);
std::shared_future<SassDump> start_sass_dump(const fs::path& exe, SassRunner run);  // in a thread
// Directly, as the grader's user (local grading). `cpus`: where cuobjdump may run (empty: any).
std::shared_future<SassDump> start_sass_dump(const fs::path& exe, const std::vector<int>& cpus);
InstructionFindings find_instructions(const std::vector<GateResult>& gates, const SassDump& dump, bool hidden);
void apply_instructions(LabResult& lab, const InstructionFindings& found);

}  // namespace labgrade
