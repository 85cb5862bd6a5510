// The machine-code checks (sass.h) on `cuobjdump --dump-sass` text written here: the parser, and the verdicts for
// needs_shared_memory and needs_instructions. cuobjdump itself (not on the CI machine) is used on GPU machines only.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdlib>
#include <fstream>

#include "labkit/rubric.h"
#include "sass.h"
#include "test_support.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// Two kernels as cuobjdump prints them for sm_90: a tiled one (its tile stored, then read back) and a naive one.
const char* const kDump = R"sass(
Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

	code for sm_90
		Function : _ZN5lab0112_GLOBAL__N_119matmul_tiled_kernelEiiiPKfS2_Pf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                          /* 0x00000a00ff017b82 */
                                                                                   /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                              /* 0x0000000000007919 */
        /*0020*/              @!P0 LDG.E R3, desc[UR4][R2.64] ;                    /* 0x0000000402038981 */
        /*0030*/                   STS [R5], R3 ;                                  /* 0x0000000305007388 */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                   /* 0x0000000000007b1d */
        /*0050*/                   LDS.U.128 R8, [R6+0x10] ;                       /* 0x0000100006087984 */
        /*0060*/                   EXIT ;                                          /* 0x000000000000794d */
		..........

		Function : _ZN5lab0112_GLOBAL__N_119matmul_naive_kernelEiiiPKfS2_Pf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                          /* 0x00000a00ff017b82 */
        /*0010*/                   LDG.E R4, desc[UR4][R2.64] ;                    /* 0x0000000402048981 */
        /*0020*/                   FFMA R7, R4, R5, R7 ;                           /* 0x0000000504077223 */
        /*0030*/                   STG.E desc[UR4][R8.64], R7 ;                    /* 0x0000000708007986 */
        /*0040*/                   EXIT ;                                          /* 0x000000000000794d */
		..........

		Function : _ZN5lab0612_GLOBAL__N_113dmma_kernelEiiPKdPd
        /*0000*/                   DMMA.884 R8, R2, R4, R8 ;                       /* 0x000000040208723f */
        /*0010*/                   EXIT ;                                          /* 0x000000000000794d */
		..........
)sass";

const std::string kTiled = "_ZN5lab0112_GLOBAL__N_119matmul_tiled_kernelEiiiPKfS2_Pf";
const std::string kNaive = "_ZN5lab0112_GLOBAL__N_119matmul_naive_kernelEiiiPKfS2_Pf";
const std::string kDmma = "_ZN5lab0612_GLOBAL__N_113dmma_kernelEiiPKdPd";

GateResult gate(bool shared, std::vector<std::string> instructions, std::vector<std::string> shared_kernels,
                std::vector<std::string> step_kernels) {
  GateResult g;
  g.id = "step3.correct";
  g.kind = "correctness";
  g.status = Status::passed;
  g.needs_shared_memory = shared;
  g.needs_instructions = std::move(instructions);
  g.names["shared_memory_kernels"] = std::move(shared_kernels);
  g.names["step_kernels"] = std::move(step_kernels);
  return g;
}

}  // namespace

TEST_CASE("parse_sass: each kernel's opcodes, without modifiers or predicates", "[sass]") {
  const SassOpcodes code = parse_sass(kDump);
  REQUIRE(code.size() == 3);
  const auto& tiled = code.at(kTiled).at("sm_90").opcodes;
  CHECK(code.at(kTiled).at("sm_90").bodies == 1);
  CHECK(tiled.count("LDS"));  // LDS.U.128
  CHECK(tiled.count("LDG"));  // @!P0 LDG.E
  CHECK(tiled.count("STS"));
  CHECK(tiled.count("BAR"));
  CHECK_FALSE(tiled.count("0x0000000000007919"));  // the encoding comments are not opcodes
  CHECK_FALSE(code.at(kNaive).at("sm_90").opcodes.count("LDS"));
  CHECK(code.at(kDmma).at("sm_90").opcodes.count("DMMA"));
  CHECK(parse_sass("").empty());
  CHECK(parse_sass("no functions here\n/*0000*/ LDS R1, [R2] ;\n").empty());  // an instruction outside a function
  // A second architecture's code of the same kernel is kept apart.
  const SassOpcodes two = parse_sass(std::string(kDump) + "\nFatbin elf code:\n================\narch = sm_86\n"
                                     "\t\tFunction : " + kDmma + "\n        /*0000*/   DFMA R2, R4, R6, R2 ;\n");
  CHECK(two.at(kDmma).at("sm_90").opcodes.count("DMMA"));
  CHECK(two.at(kDmma).at("sm_86").opcodes == std::set<std::string>{"DFMA"});
  // Two files' bodies under one name (static kernels are named without their file) are counted.
  const SassOpcodes twice = parse_sass(std::string(kDump) + "\narch = sm_90\n\t\tFunction : " + kNaive +
                                       "\n        /*0000*/   LDS R2, [R4] ;\n");
  CHECK(twice.at(kNaive).at("sm_90").bodies == 2);
  CHECK(twice.at(kTiled).at("sm_90").bodies == 1);
}

TEST_CASE("judge_instructions: shared memory that is read, and the instructions a step is about", "[sass]") {
  const SassOpcodes code = parse_sass(kDump);
  // A tiled kernel reads its tile: passes.
  CHECK(judge_instructions(gate(true, {}, {kTiled}, {kTiled}), code) == std::optional<std::string>(""));
  // The naive kernel launched with dynamic shared memory it never reads: fails, naming it.
  const auto naive = judge_instructions(gate(true, {}, {kNaive}, {kNaive}), code);
  REQUIRE(naive);
  CHECK_THAT(*naive, ContainsSubstring("never read it"));
  CHECK_THAT(*naive, ContainsSubstring("matmul_naive_kernel"));
  // A kernel not in the binary's SASS (PTX only, or another library's) cannot be judged.
  CHECK_FALSE(judge_instructions(gate(true, {}, {"_Z7unknownv"}, {"_Z7unknownv"}), code));
  CHECK_FALSE(judge_instructions(gate(true, {}, {kNaive, "_Z7unknownv"}, {kNaive}), code));
  // No shared-memory kernel at all is the gate's own check ("ran no kernel of your own that uses shared memory").
  CHECK_FALSE(judge_instructions(gate(true, {}, {}, {kNaive}), code));
  // Tensor cores: step 6's kind of kernel in step 7a fails, a DMMA kernel passes; a library kernel alone is not judged.
  const auto plain = judge_instructions(gate(false, {"DMMA"}, {}, {kTiled}), code);
  REQUIRE(plain);
  CHECK_THAT(*plain, ContainsSubstring("holds DMMA"));
  CHECK(judge_instructions(gate(false, {"DMMA"}, {}, {kTiled, kDmma}), code) == std::optional<std::string>(""));
  CHECK_FALSE(judge_instructions(gate(false, {"DMMA"}, {}, {"_Z11cublasKernelv"}), code));
  // instruction_archs: only the code for those architectures is judged.
  const SassOpcodes sm86 =
      parse_sass("arch = sm_86\n\t\tFunction : " + kDmma + "\n  /*0000*/  DFMA R2, R4, R6, R2 ;\n");
  GateResult on = gate(false, {"DMMA"}, {}, {kDmma});
  on.instruction_archs = {"sm_80", "sm_90", "sm_100"};
  CHECK_FALSE(judge_instructions(on, sm86));  // sm_86 has no fp64 tensor cores: not judged
  on.instruction_archs.clear();
  CHECK(judge_instructions(on, sm86));  // judged everywhere: no DMMA there
  on.instruction_archs = {"sm_90"};
  const SassOpcodes sm90a = parse_sass(std::string("arch = sm_90a\n") + kDump);
  CHECK(judge_instructions(on, sm90a) == std::optional<std::string>(""));
  // A name with two bodies (which one ran?), a kernel that calls other functions (the callee may hold the load),
  // and a list with one kernel that cannot be judged: not judged.
  const SassOpcodes twice = parse_sass(std::string(kDump) + "\narch = sm_90\n\t\tFunction : " + kNaive +
                                       "\n        /*0000*/   LDS R2, [R4] ;\n");
  CHECK_FALSE(judge_instructions(gate(true, {}, {kNaive}, {kNaive}), twice));
  const SassOpcodes calls = parse_sass("arch = sm_90\n\t\tFunction : " + kNaive +
                                       "\n  /*0000*/  CALL.REL.NOINC 0x100 ;\n  /*0010*/  EXIT ;\n");
  CHECK_FALSE(judge_instructions(gate(true, {}, {kNaive}, {kNaive}), calls));
  CHECK_FALSE(judge_instructions(gate(false, {"DMMA"}, {}, {kTiled, "_Z7unknownv"}), code));
  // Nothing asked: nothing judged.
  CHECK_FALSE(judge_instructions(gate(false, {}, {kNaive}, {kNaive}), code));
}

TEST_CASE("needs_instructions in the rubric: correctness gates, a list of opcodes in capitals", "[sass][rubric]") {
  const std::string base =
      "lab = \"42\"\ntitle = \"t\"\n[[gate]]\nid = \"step7a.correct\"\ntitle = \"c\"\npoints = 1\n";
  const auto r = labkit::parse_rubric(base + "needs_instructions = [\"DMMA\", \"HMMA\"]\n", "r.toml");
  CHECK(r.find("step7a.correct")->needs_instructions == std::vector<std::string>{"DMMA", "HMMA"});
  CHECK(labkit::parse_rubric(base, "r.toml").find("step7a.correct")->needs_instructions.empty());
  for (const char* bad : {"needs_instructions = []\n", "needs_instructions = \"DMMA\"\n",
                          "needs_instructions = [\"dmma\"]\n", "needs_instructions = [\"DMMA.884\"]\n",
                          "needs_instructions = [1]\n"}) {
    INFO(bad);
    CHECK_THROWS_WITH(labkit::parse_rubric(base + bad, "r.toml"), ContainsSubstring("needs_instructions takes"));
  }
  const std::string dmma = "needs_instructions = [\"DMMA\"]\n";
  const auto archs = labkit::parse_rubric(base + dmma + "instruction_archs = [\"sm_80\", \"sm_90\"]\n", "r.toml");
  CHECK(archs.find("step7a.correct")->instruction_archs == std::vector<std::string>{"sm_80", "sm_90"});
  const std::vector<std::string> bad_archs = {"instruction_archs = [\"sm_90\"]\n", dmma + "instruction_archs = []\n",
                                             dmma + "instruction_archs = [\"90\"]\n",
                                             dmma + "instruction_archs = [\"sm_90a\"]\n"};
  for (const std::string& bad : bad_archs) {
    INFO(bad);
    CHECK_THROWS_WITH(labkit::parse_rubric(base + bad, "r.toml"), ContainsSubstring("instruction_archs takes"));
  }
  CHECK_THROWS_WITH(labkit::parse_rubric(std::string(base) + "kind = \"cpu\"\nneeds_instructions = [\"DMMA\"]\n",
                                         "r.toml"),
                    ContainsSubstring("needs_instructions is for correctness gates"));
}

TEST_CASE("forbid_instructions: a kernel the gate ran that holds one fails it; unread kernels leave it unjudged",
          "[sass][rubric]") {
  const std::string base =
      "lab = \"42\"\ntitle = \"t\"\n[[gate]]\nid = \"step5.correct\"\ntitle = \"c\"\npoints = 1\n";
  const auto r = labkit::parse_rubric(base + "forbid_instructions = [\"HMMA\", \"IMMA\"]\n", "r.toml");
  CHECK(r.find("step5.correct")->forbid_instructions == std::vector<std::string>{"HMMA", "IMMA"});
  CHECK_THROWS_WITH(labkit::parse_rubric(base + "forbid_instructions = [\"hmma\"]\n", "r.toml"),
                    ContainsSubstring("forbid_instructions takes"));
  CHECK_THROWS_WITH(labkit::parse_rubric(base + "kind = \"cpu\"\nforbid_instructions = [\"HMMA\"]\n", "r.toml"),
                    ContainsSubstring("forbid_instructions is for correctness gates"));

  std::string text = kDump;
  text += "\t\tFunction : _ZN5lab0112_GLOBAL__N_110tf32_splitEv\n"
          "        /*0000*/                   HMMA.1684.F32.TF32 R8, R2, R4, R8 ;  /* 0x000000040208723c */\n"
          "        /*0010*/                   EXIT ;                                /* 0x000000000000794d */\n";
  const SassOpcodes code = parse_sass(text);
  GateResult g = gate(false, {}, {}, {kNaive, "_ZN5lab0112_GLOBAL__N_110tf32_splitEv"});
  g.forbid_instructions = {"HMMA", "IMMA"};
  const auto failed = judge_instructions(g, code);
  REQUIRE(failed);
  CHECK_THAT(*failed, ContainsSubstring("holds HMMA"));
  CHECK_THAT(*failed, ContainsSubstring("tf32_split"));
  g.names["step_kernels"] = {kNaive, kTiled};  // neither holds one: judged and passed
  CHECK(judge_instructions(g, code) == std::optional<std::string>(""));
  g.names["step_kernels"] = {kNaive, "_Z7unknownv"};  // one not in the binary: not judged
  CHECK_FALSE(judge_instructions(g, code));
  LabResult lab;
  lab.gates.push_back(g);
  CHECK(needs_machine_code(lab));
  // A kernel that calls a function: the functions of its namespace are read too (a __noinline__ helper with the mma).
  std::string calls = kDump;
  calls += "\t\tFunction : _ZN5lab0112_GLOBAL__N_16caller_kernelEv\n"
           "        /*0000*/                   CALL.REL.NOINC 0x40 ;                  /* 0x0000004000007944 */\n"
           "        /*0010*/                   EXIT ;                                 /* 0x000000000000794d */\n"
           "\t\tFunction : _ZN5lab0112_GLOBAL__N_16helperEv\n"
           "        /*0000*/                   HMMA.16816.F32 R8, R2, R4, R8 ;        /* 0x000000040208723c */\n"
           "        /*0010*/                   RET.REL.NODEC R20 0x0 ;                /* 0x0000000014007950 */\n";
  const SassOpcodes with_call = parse_sass(calls);
  g.names["step_kernels"] = {"_ZN5lab0112_GLOBAL__N_16caller_kernelEv"};
  const auto called = judge_instructions(g, with_call);
  REQUIRE(called);
  CHECK_THAT(*called, ContainsSubstring("a function of the gate binary that a kernel of yours"));
  CHECK_THAT(*called, ContainsSubstring("helper"));
  // The helper in another namespace (a device function has no host symbol, so the object check never saw it).
  std::string elsewhere = calls;
  elsewhere.replace(elsewhere.find("_ZN5lab0112_GLOBAL__N_16helperEv"), 32, "_ZN6helper5tf32zEv");
  const auto other_ns = judge_instructions(g, parse_sass(elsewhere));
  REQUIRE(other_ns);
  CHECK_THAT(*other_ns, ContainsSubstring("helper::tf32z"));
  // Another step's kernel holding one (its own gate judges it) does not fail this gate through the call.
  std::string step5 = calls;
  step5.replace(step5.find("_ZN5lab0112_GLOBAL__N_16helperEv"), 32, "_ZN5lab0112_GLOBAL__N_16step5kEv");
  CHECK(judge_instructions(g, parse_sass(step5), {"_ZN5lab0112_GLOBAL__N_16step5kEv"}) ==
        std::optional<std::string>(""));
  CHECK(judge_instructions(g, parse_sass(step5)));  // unknown as a kernel: read as a function it may call
  // The same call where no function holds one: judged and passed (the forbidden list here has no DMMA, which lab
  // 06's kernel in the dump holds).
  std::string clean = calls;
  clean.replace(clean.find("HMMA.16816.F32"), 14, "FFMA          ");
  CHECK(judge_instructions(g, parse_sass(clean)) == std::optional<std::string>(""));
}

namespace {
// A stand-in cuobjdump first on PATH for the scope: it prints `dump` when asked for the whole binary's SASS (with
// `fails`, an error and exit status 1), and refuses anything else, such as --function: the check reads the whole
// binary, whose dump starts before the gates that say which kernels ran have ended.
struct FakeCuobjdump {
  test::TempDir dir{"cuobjdump"};
  std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  FakeCuobjdump(const std::string& dump, bool fails) {
    std::ofstream(dir.path / "dump.txt") << dump;
    const fs::path exe = dir.path / "cuobjdump";
    std::ofstream(exe) << "#!/bin/sh\n"
                       << "[ \"$1\" = --dump-sass ] && [ $# -eq 2 ] || { echo 'unexpected arguments' >&2; exit 2; }\n"
                       << (fails ? "echo 'cuobjdump fatal   : Could not open input file' >&2; exit 1\n" : "")
                       << "cat '" << (dir.path / "dump.txt").string() << "'\n";
    fs::permissions(exe, fs::perms::owner_all);
    setenv("PATH", (dir.path.string() + ":" + saved).c_str(), 1);
  }
  ~FakeCuobjdump() { setenv("PATH", saved.c_str(), 1); }
};

// What run_and_score does for one visibility, in this thread: the dump, the judgement, the findings applied.
void check_instructions(LabResult& lab, const fs::path& exe, bool hidden) {
  if (needs_machine_code(lab))
    apply_instructions(lab, find_instructions(lab.gates, start_sass_dump(exe, std::vector<int>{}).get(), hidden));
}
}  // namespace

TEST_CASE("check_instructions: fails the passed gates whose kernels lack what their step is about", "[sass]") {
  {
    FakeCuobjdump fake(kDump, false);
    LabResult lab;
    lab.gates.push_back(gate(true, {}, {kTiled}, {kTiled}));
    lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));
    lab.gates.back().id = "step4.correct";
    lab.gates.push_back(gate(false, {"DMMA"}, {}, {"_Z7unknownv"}));  // not in the binary: not judged
    lab.gates.back().id = "step7a.correct";
    lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));  // already failed: left alone
    lab.gates.back().id = "step5.correct";
    lab.gates.back().status = Status::failed;
    lab.gates.back().message = "its own failure";
    check_instructions(lab, "/nonexistent/gates", false);
    CHECK(lab.gates[0].status == Status::passed);
    CHECK(lab.gates[1].status == Status::failed);
    CHECK_THAT(lab.gates[1].message, ContainsSubstring("never read it"));
    CHECK(lab.gates[2].status == Status::passed);
    CHECK(lab.gates[3].message == "its own failure");
    REQUIRE(lab.notes.size() == 1);
    CHECK_THAT(lab.notes[0], ContainsSubstring("machine code: 2 gate(s) checked"));
    CHECK_THAT(lab.notes[0], ContainsSubstring("1 failed"));
    CHECK_THAT(lab.notes[0], ContainsSubstring("1 not judged"));
  }
}

TEST_CASE("check_instructions: a dump that fails or is not needed changes no gate", "[sass]") {
  {
    FakeCuobjdump fake(kDump, true);
    LabResult lab;
    lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));
    check_instructions(lab, "/nonexistent/gates", false);
    CHECK(lab.gates[0].status == Status::passed);
    REQUIRE(lab.notes.size() == 1);
    CHECK_THAT(lab.notes[0], ContainsSubstring("machine-code checks not done: cuobjdump --dump-sass failed"));
    CHECK_THAT(lab.notes[0], ContainsSubstring("Could not open input file"));
    // cuobjdump was there and could not read the binary: the instructor is asked to read the code.
    CHECK_THAT(lab.notes[0], Catch::Matchers::StartsWith(kObjectReviewNote));
  }
  {  // No gate of the rubric needs it: cuobjdump is not even started (a failing one would leave a note).
    FakeCuobjdump fake(kDump, true);
    LabResult lab;
    lab.gates.push_back(gate(false, {}, {kNaive}, {kNaive}));
    CHECK_FALSE(needs_machine_code(lab));
    check_instructions(lab, "/nonexistent/gates", false);
    CHECK(lab.notes.empty());
  }
}

TEST_CASE("start_sass_dump: one dump in a thread, judged for each visibility as check_instructions judges", "[sass]") {
  FakeCuobjdump fake(kDump, false);
  LabResult lab;
  lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));
  lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));
  lab.gates.back().hidden = true;
  lab.gates.push_back(gate(true, {}, {kTiled}, {kTiled}));
  lab.gates.back().id = "step4.correct";
  lab.gates.back().hidden = true;
  const std::shared_future<SassDump> dump = start_sass_dump("/nonexistent/gates", std::vector<int>{});
  REQUIRE(dump.get().code);
  apply_instructions(lab, find_instructions(lab.gates, dump.get(), false));
  CHECK(lab.gates[0].status == Status::failed);
  CHECK(lab.gates[1].status == Status::passed);  // hidden: judged with the hidden gates
  lab.gates[1].status = Status::failed;          // as a sanitizer run may fail a gate before the findings apply
  lab.gates[1].message = "racecheck: a hazard";
  const InstructionFindings hidden = find_instructions(lab.gates, dump.get(), true);
  CHECK(hidden.failures.empty());  // a gate no longer passed is not judged
  apply_instructions(lab, hidden);
  CHECK(lab.gates[1].message == "racecheck: a hazard");
  CHECK(lab.gates[2].status == Status::passed);
  REQUIRE(lab.notes.size() == 2);
  CHECK_THAT(lab.notes[1], ContainsSubstring("machine code: 1 hidden gate(s) checked"));
}

TEST_CASE("dump_sass through a runner: a dump over 64 MiB, a timeout and a missing cuobjdump are notes", "[sass]") {
  FakeCuobjdump fake(kDump, false);
  LabResult lab;
  lab.gates.push_back(gate(true, {}, {kNaive}, {kNaive}));
  std::vector<std::string> seen;
  const auto over = [&seen](const std::vector<std::string>& argv, double) {
    seen = argv;
    return CommandResult{0, std::string(kSassDumpLimit + 1, 'x'), false};
  };
  const SassDump big = dump_sass("/some/gates", over);
  REQUIRE(seen.size() == 3);
  CHECK(seen[1] == "--dump-sass");
  CHECK(seen[2] == "/some/gates");
  CHECK_FALSE(big.code);
  CHECK(big.review);
  CHECK_THAT(big.why_not, ContainsSubstring("over 64 MiB"));
  const SassDump late =
      dump_sass("/some/gates", [](const std::vector<std::string>&, double) { return CommandResult{-1, "", true}; });
  CHECK_THAT(late.why_not, ContainsSubstring("timed out"));
  const SassDump good =
      dump_sass("/some/gates", [](const std::vector<std::string>&, double) { return CommandResult{0, kDump, false}; });
  REQUIRE(good.code);
  CHECK_FALSE(good.review);
  apply_instructions(lab, find_instructions(lab.gates, good, false));
  CHECK(lab.gates[0].status == Status::failed);
  // No cuobjdump at all: a plain note (not a request to read code), and the runner is never called.
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  bool called = false;
  const SassDump none = dump_sass("/some/gates", [&called](const std::vector<std::string>&, double) {
    called = true;
    return CommandResult{};
  });
  setenv("PATH", saved.c_str(), 1);
  if (!fs::exists("/usr/local/cuda/bin/cuobjdump")) {  // find_program also looks there
    CHECK_FALSE(called);
    CHECK_FALSE(none.review);
    CHECK_THAT(none.why_not, ContainsSubstring("not found"));
  }
}
