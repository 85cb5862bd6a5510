// labkit::gate::under_sanitizer and SanitizerCap: the gates leave out their largest cases under compute-sanitizer
// (LABKIT_SANITIZER set, as `labgrade --sanitize` does) and nowhere else.
#include <catch2/catch_test_macros.hpp>
#include <cstdlib>

#include "labkit/gate.h"

using labkit::gate::SanitizerCap;
using labkit::gate::under_sanitizer;

TEST_CASE("gates leave out their largest cases under a sanitizer only", "[gate]") {
  unsetenv("LABKIT_SANITIZER");
  CHECK(!under_sanitizer());
  CHECK(labkit::gate::sanitizer_tool().empty());
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");
    CHECK(!cap.skips(1e12, "huge"));  // a normal run keeps every case
    CHECK(cap.summary().empty());
  }
  setenv("LABKIT_SANITIZER", "", 1);
  CHECK(!under_sanitizer());
  setenv("LABKIT_SANITIZER", "0", 1);
  CHECK(!under_sanitizer());
  CHECK(labkit::gate::sanitizer_tool().empty());  // "0" is no tool
  setenv("LABKIT_SANITIZER", "1", 1);
  CHECK(under_sanitizer());
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  CHECK(under_sanitizer());
  CHECK(labkit::gate::sanitizer_tool() == "racecheck");
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");
    CHECK(!cap.skips(double(1 << 26), "at the cap"));
    CHECK(cap.summary().empty());
    CHECK(cap.skips(double(1 << 26) + 1, "M=2048 N=2048 K=2048"));
    CHECK(cap.skips(1e12, "n = 10"));
    CHECK(cap.summary() ==
          "under compute-sanitizer (LABKIT_SANITIZER=racecheck): left out M=2048 N=2048 K=2048; n = 10 (above 2^26 "
          "multiply-adds; the small and odd cases check bounds and races)");
  }
  {
    SanitizerCap cap(3e6, "keys");
    CHECK(cap.skips(3e6 + 1, "n = 3000001"));
    CHECK(cap.summary().find("(above 3000000 keys;") != std::string::npos);
  }
  unsetenv("LABKIT_SANITIZER");
}

TEST_CASE("the grader's default checks keep only the small shapes", "[gate]") {
  setenv("LABKIT_SANITIZER_SMALL", "1", 1);
  unsetenv("LABKIT_SANITIZER");
  CHECK(!labkit::gate::sanitizer_small_shapes());  // without a sanitizer it means nothing
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");
    CHECK(!cap.skips(1e12, "huge"));
  }
  setenv("LABKIT_SANITIZER", "memcheck", 1);
  CHECK(labkit::gate::sanitizer_small_shapes());
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");
    CHECK(!cap.skips(double(1 << 22), "M=N=K=161"));
    CHECK(cap.skips(double(1 << 22) + 1, "just above a sixteenth"));
    CHECK(cap.summary().find("(above 2^22 multiply-adds;") != std::string::npos);
  }
  unsetenv("LABKIT_SANITIZER_SMALL");
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");  // labgrade --sanitize: the full cap
    CHECK(!cap.skips(double(1 << 22) + 1, "kept"));
  }
  unsetenv("LABKIT_SANITIZER");
}

TEST_CASE("racecheck in the default checks takes the lab's race cap where it gives one", "[gate]") {
  setenv("LABKIT_SANITIZER_SMALL", "1", 1);
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(!cap.skips(double(1 << 19), "at the race cap"));
    CHECK(cap.skips(double(1 << 19) + 1, "M=127 N=131 K=137"));
    CHECK(cap.summary().find("(above 2^19 multiply-adds;") != std::string::npos);
  }
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds");  // no race cap: a sixteenth, as for memcheck
    CHECK(!cap.skips(double(1 << 22), "kept"));
  }
  setenv("LABKIT_SANITIZER", "memcheck", 1);
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));  // memcheck: still a sixteenth
    CHECK(!cap.skips(double(1 << 22), "kept"));
    CHECK(cap.skips(double(1 << 22) + 1, "left out"));
  }
  unsetenv("LABKIT_SANITIZER_SMALL");
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));  // labgrade --sanitize: the full cap
    CHECK(!cap.skips(double(1 << 26), "kept"));
  }
  unsetenv("LABKIT_SANITIZER");
}

TEST_CASE("a gate's own small-shapes cap replaces the sixteenth in the default checks only", "[gate]") {
  setenv("LABKIT_SANITIZER_SMALL", "1", 1);
  setenv("LABKIT_SANITIZER", "memcheck", 1);
  {
    SanitizerCap cap(double(1 << 21), "keys", 4097, 8193);
    CHECK(!cap.skips(8193, "n = 8193"));
    CHECK(cap.skips(8194, "n = 8194"));
    CHECK(cap.summary().find("(above 8193 keys;") != std::string::npos);
  }
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  {
    SanitizerCap cap(double(1 << 21), "keys", 4097, 8193);  // racecheck keeps its race cap
    CHECK(!cap.skips(4097, "n = 4097"));
    CHECK(cap.skips(4098, "n = 4098"));
  }
  unsetenv("LABKIT_SANITIZER_SMALL");
  setenv("LABKIT_SANITIZER", "memcheck", 1);
  {
    SanitizerCap cap(double(1 << 21), "keys", 4097, 8193);  // labgrade --sanitize: the full cap
    CHECK(!cap.skips(double(1 << 21), "n = 2^21"));
  }
  unsetenv("LABKIT_SANITIZER");
}

TEST_CASE("cases left to memcheck are skipped by the default checks' racecheck only", "[gate]") {
  unsetenv("LABKIT_SANITIZER_SMALL");
  unsetenv("LABKIT_SANITIZER");
  CHECK(!labkit::gate::default_racecheck());
  CHECK(labkit::gate::repeat_runs());  // a graded run repeats for the run-to-run comparison
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(!cap.skips_racecheck("offsets 1,0,0"));
    CHECK(cap.summary().empty());
  }
  setenv("LABKIT_SANITIZER", "racecheck", 1);  // labgrade --sanitize: every case under both tools
  CHECK(!labkit::gate::default_racecheck());
  CHECK(!labkit::gate::repeat_runs());  // no verdict of a sanitized run counts: nothing to compare
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(!cap.skips_racecheck("offsets 1,0,0"));
  }
  setenv("LABKIT_SANITIZER_SMALL", "1", 1);
  setenv("LABKIT_SANITIZER", "memcheck", 1);
  CHECK(!labkit::gate::default_racecheck());
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(!cap.skips_racecheck("offsets 1,0,0"));  // memcheck is what checks them
    CHECK(!cap.skips(double(1 << 20), "M=127 N=131 K=137", false));  // under memcheck's cap of 2^22
    CHECK(cap.skips(double(1 << 23), "M=260 N=264 K=300", true));    // above it, whatever racecheck keeps
  }
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  CHECK(labkit::gate::default_racecheck());
  {
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(cap.skips_racecheck("M=68 N=132 K=36, offsets 1,0,0"));
    CHECK(cap.summary() ==
          "under compute-sanitizer (LABKIT_SANITIZER=racecheck): left out M=68 N=132 K=36, offsets 1,0,0 (their blocks "
          "meet the same barriers as the cases racecheck runs; memcheck checks them)");
    CHECK(cap.skips(double(1 << 20), "M=127 N=131 K=137"));
    CHECK(cap.summary() ==
          "under compute-sanitizer (LABKIT_SANITIZER=racecheck): left out M=127 N=131 K=137 (above 2^19 multiply-adds; "
          "the small and odd cases check bounds and races); and M=68 N=132 K=36, offsets 1,0,0 (their blocks meet "
          "the same barriers as the cases racecheck runs; memcheck checks them)");
  }
  {
    // One call for both choices: above the race cap a case is named as such, whether racecheck would keep it or not;
    // under it, a case racecheck does not keep is left to memcheck, one it keeps runs.
    SanitizerCap cap(double(1 << 26), "multiply-adds", double(1 << 19));
    CHECK(cap.skips(double(1 << 20), "M=127 N=131 K=137", false));
    CHECK(cap.skips(double(1 << 18), "M=5 N=7 K=1000", false));
    CHECK(!cap.skips(double(1 << 18), "M=33 N=65 K=129", true));
    CHECK(cap.summary() ==
          "under compute-sanitizer (LABKIT_SANITIZER=racecheck): left out M=127 N=131 K=137 (above 2^19 multiply-adds; "
          "the small and odd cases check bounds and races); and M=5 N=7 K=1000 (their blocks meet the same barriers "
          "as the cases racecheck runs; memcheck checks them)");
  }
  unsetenv("LABKIT_SANITIZER_SMALL");
  unsetenv("LABKIT_SANITIZER");
}
