// main() of every gate binary: Catch2 with two extra options and a listener that writes the structured result
// channel (see labkit/report.h) for the grader.
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_case_info.hpp>
#include <catch2/catch_translate_exception.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#include <catch2/catch_get_random_seed.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/gate.h"
#include "labkit/not_implemented.h"
#include "labkit/report.h"

namespace labkit::detail {
extern const char* const gate_lab_id;
extern const char* const gate_default_rubric;
extern std::string gate_binary;
extern std::string gate_rubric_path;
}  // namespace labkit::detail

namespace {

struct GateState {
  bool not_implemented = false;
  bool context_lost = false;
  bool crashed = false;
  std::string messages;
  std::chrono::steady_clock::time_point start;
};
GateState g_state;

void add_message(const std::string& m) {
  if (m.empty()) return;
  if (!g_state.messages.empty()) g_state.messages += "\n";
  g_state.messages += m;
}

bool context_lost_now() {
  if (!labkit::has_device()) return false;
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  return labkit::is_sticky(e);
}

class ResultChannelListener : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;

  void testRunStarting(const Catch::TestRunInfo&) override {
    labkit::report::detail::set_lab(labkit::detail::gate_lab_id);
    nlohmann::json j{{"event", "run_start"},
                     {"lab", labkit::detail::gate_lab_id},
                     {"seed", Catch::getSeed()},
                     {"secret", labkit::gate::secret()},
                     {"rubric", labkit::detail::gate_rubric_path}};
    j["device"] = labkit::has_device() ? labkit::describe(labkit::device_info()) : labkit::no_device_reason();
    labkit::report::detail::write_line(j.dump());
  }

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    g_state = GateState{};
    g_state.start = std::chrono::steady_clock::now();
    labkit::report::detail::set_current_gate(info.name);
    labkit::report::detail::write_line(nlohmann::json{{"event", "gate_start"}, {"gate", info.name}}.dump());
  }

  void assertionEnded(const Catch::AssertionStats& stats) override {
    const auto& r = stats.assertionResult;
    if (r.isOk() && r.getResultType() != Catch::ResultWas::ExplicitSkip) return;
    // AssertionStats already carries the assertion's own message (FAIL, SKIP, a translated exception) among
    // infoMessages, after the INFO/CAPTURE context; only a failed expression needs its expansion added.
    std::string text;
    for (const auto& info : stats.infoMessages) {
      if (!text.empty()) text += "\n";
      text += info.message;
    }
    if (r.hasExpression() && r.getResultType() == Catch::ResultWas::ExpressionFailed)
      text += (text.empty() ? "" : "\n") + std::string("check failed: ") + r.getExpressionInMacro() + " with " +
              r.getExpandedExpression();
    add_message(text);
  }

  void fatalErrorEncountered(Catch::StringRef error) override {
    g_state.crashed = true;
    add_message("the gate binary crashed: " + std::string(error));
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    const auto& a = stats.totals.assertions;
    if (!g_state.crashed && context_lost_now()) {
      g_state.context_lost = true;
      add_message("the CUDA context was destroyed (an illegal address or a trap in a kernel)");
    }
    std::string status;
    if (g_state.crashed)
      status = "crashed";
    else if (g_state.not_implemented)
      status = "not_implemented";
    else if (a.failed > 0)
      status = g_state.context_lost ? "crashed" : "failed";
    else if (a.skipped > 0)
      status = "skipped";
    else
      status = "passed";
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_state.start).count();
    nlohmann::json j{{"event", "gate_end"}, {"gate", stats.testInfo->name}, {"status", status},
                     {"message", g_state.messages}, {"seconds", seconds}};
    labkit::report::detail::write_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    labkit::report::detail::set_current_gate("");
    if (g_state.context_lost) {
      std::cerr << "labkit: the CUDA context is lost; stopping here (the grader restarts the remaining gates in a "
                   "fresh process)"
                << std::endl;
      std::_Exit(3);
    }
  }

  void testRunEnded(const Catch::TestRunStats& stats) override {
    const auto& t = stats.totals.testCases;
    labkit::report::detail::write_line(nlohmann::json{{"event", "run_end"},
                                                      {"passed", t.passed},
                                                      {"failed", t.failed},
                                                      {"skipped", t.skipped}}
                                           .dump());
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(ResultChannelListener)

CATCH_TRANSLATE_EXCEPTION(const labkit::NotImplemented& e) {
  g_state.not_implemented = true;
  return e.what();
}

CATCH_TRANSLATE_EXCEPTION(const labkit::CudaError& e) {
  if (e.sticky()) g_state.context_lost = true;
  return e.what();
}

// Under an MPI launcher every process of the job runs this binary; only world rank 0 writes the result channel (the
// lab's gates agree on one verdict across processes). The launcher sets the rank in the environment before this
// process starts, so no code of the submission decides it. mpirun does not pass its own descriptors on to the
// processes it starts: the grader then names the channel "@parent:N", descriptor N of this process's parent (the
// launcher).
static std::string channel_of_this_process(const std::string& results) {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) {
      if (std::string(r) != "0") return "";
      break;
    }
  if (results.rfind("@parent:", 0) == 0) return "/proc/" + std::to_string(getppid()) + "/fd/" + results.substr(8);
  return results;
}

int main(int argc, char** argv) {
  Catch::Session session;
  std::string results, rubric, secret;
  using namespace Catch::Clara;
  auto cli = session.cli() |
             Opt(results, "path")["--labkit-results"]("append each gate's result as a JSON line to this file") |
             Opt(rubric, "path")["--labkit-rubric"]("the rubric.toml with the speed thresholds (default: the lab's)") |
             Opt(secret, "number")["--labkit-secret"]("the per-run secret mixed into the input seeds (default: random; "
                                                      "given to reproduce a run, see labkit/gate.h)");
  session.cli(cli);
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  if (!secret.empty()) {
    try {
      std::size_t used = 0;
      labkit::gate::detail::set_secret(std::stoull(secret, &used, 0));
      if (used != secret.size()) throw std::invalid_argument(secret);
    } catch (const std::exception&) {
      std::cerr << "--labkit-secret takes an unsigned 64-bit number, not '" << secret << "'" << std::endl;
      return 2;
    }
  }
  labkit::detail::gate_binary = argv[0];
  labkit::detail::gate_rubric_path = rubric.empty() ? labkit::detail::gate_default_rubric : rubric;
  try {
    labkit::report::detail::open(channel_of_this_process(results));
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 2;
  }
  return session.run();
}
