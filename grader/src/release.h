// `labgrade release OUT_DIR`: the student release of the workbook. Copies the repository's files (what git
// tracks or would track, or a walk that skips build folders when there is no git) except
//   solutions/, labs/*/tests/hidden/, grader/fixtures/planted/ (fixtures made from the solutions),
// and rewrites each labs/*/rubric.toml without its hidden [[gate]] tables (comments kept). The result builds and
// grades as it is: the build skips missing solutions, and no rubric names a gate the release lacks.
#pragma once
#include <string>

#include "util.h"

namespace labgrade {

struct ReleaseOptions {
  fs::path out;
  fs::path root;       // empty: the repository around the current folder
  bool force = false;  // replace an existing, non-empty OUT_DIR
};

int release_main(const ReleaseOptions& opts);

// The rubric text without hidden gates. Keeps comments and layout; the comment lines right above a dropped gate
// go with it. Throws UserError when the result does not parse or lost a visible gate.
std::string strip_hidden_gates(const std::string& rubric_text, const std::string& source_name, int* dropped = nullptr);

}  // namespace labgrade
