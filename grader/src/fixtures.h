// Fixture submissions: small student folders that each break one thing (grader/fixtures/), and the check of a
// batch's results against what each fixture expects. Used by the grader's tests and by
// grader/tests/device_fixtures.sh on a GPU machine.
//
// Two kinds of fixture folder:
//   plain   <name>/labs/NN_topic/student/*.cu ... plus <name>/expect.toml: copied as it is.
//   patch   <name>/patch.toml: starts from the reference solution of each lab it touches (every file of
//           solutions/NN_x/ becomes labs/NN_x/student/, so the steps it does not touch are there and correct) and
//           applies exact replacements to the files it names, each of which must match exactly once:
//             [[replace]]
//             file = "labs/01_matmul/student/matmul.cu"
//             from = "__syncthreads();"
//             to = ""
// Expectations (in expect.toml, or in patch.toml):
//   lab = "01"               optional: default, the lab folder the fixture touches
//   description = "..."      optional
//   [expect]                 with a GPU. Either status -> gates (every other gate must pass) ...
//   fail = ["step3.correct", "step3.speed"]
//   message = { "step3.correct" = "text the diagnosis must contain" }
//                            ... or gate -> status (a list allows several), "*" = every other gate:
//   expect = { "step3.correct" = "failed", "*" = "passed" }
//   expect_nogpu = { ... }   optional overrides without a GPU; by default every gate that needs a GPU (not kind
//                            cpu / not cpu.*) is expected "skipped" there
//   expect_message = { ... } same as message inside [expect]
#pragma once
#include <map>
#include <string>
#include <vector>

#include "scoring.h"
#include "util.h"

namespace labgrade {

struct Replacement {
  std::string file, from, to;
};

struct Fixture {
  std::string name;  // also the student name in a batch ("planted-x" for planted/x)
  std::string description;
  fs::path dir;
  bool patch = false;
  std::vector<Replacement> replacements;
  std::string lab;  // id or folder name of the lab the expectations are about
  std::map<std::string, std::vector<Status>> expect, expect_nogpu;
  std::map<std::string, std::string> expect_message;
};

// Every fixture below dir (folders with expect.toml or patch.toml, also one level down, e.g. planted/<name>).
std::vector<Fixture> load_fixtures(const fs::path& dir);
Fixture load_fixture(const fs::path& fixture_dir);

// Writes the fixture's submission to dest (dest/labs/...). solution_roots: folders holding solutions/NN_x/
// (the repository, the grader's fake lab). Throws UserError when a replacement does not match exactly once.
void materialise(const Fixture& f, const fs::path& dest, const std::vector<fs::path>& solution_roots);

// A submission made of every lab's reference solution (the control group: everything must pass).
void materialise_solutions(const fs::path& dest, const std::vector<fs::path>& solution_roots);

struct FixtureCheck {
  std::string student, lab, gate, expected, got;
  bool ok = false;
  std::string why;  // message check failures, missing results
};

// Compares a batch's OUT/<student>/result.json with the expectations. Students named solution* are expected to
// pass everything. have_gpu selects expect or the derived expect_nogpu.
std::vector<FixtureCheck> check_fixtures(const fs::path& out, const std::vector<Fixture>& fixtures, bool have_gpu,
                                         const std::vector<std::string>& solution_students);

// The PASS/FAIL table; returns true when every check passed.
bool print_checks(std::ostream& os, const std::vector<FixtureCheck>& checks);

// Expected statuses of one gate (exposed for the tests).
std::vector<Status> expected_statuses(const Fixture& f, const GateResult& g, bool have_gpu);

}  // namespace labgrade
