// Progress display: the status line, bars and phases, against hand-written expectations.
#include "catch.h"

#include "core/log/progress.h"
#include "core/log/status_line.h"

#include <cstdio>
#include <string>

using namespace ptrain;

namespace {

// Everything written to a temporary FILE* so far.
std::string contents_of(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  std::fseek(file, 0, SEEK_END);
  return text;
}

struct TempFile {
  std::FILE* file = std::tmpfile();
  ~TempFile() { std::fclose(file); }
};

}  // namespace

TEST_CASE("the status line moves out of the way of log lines and redraws below them", "[monitoring]") {
  TempFile out;
  log::StatusLine status(out.file, true);
  status.show("step 1/4");
  status.write_above([&] { std::fputs("12:00:00 r0 info  [train] hello\n", out.file); });
  status.clear();
  const std::string erase = "\r\033[K";
  CHECK(contents_of(out.file) ==
        erase + "step 1/4" + erase + "12:00:00 r0 info  [train] hello\n" + erase + "step 1/4" + erase);
}

TEST_CASE("a disabled status line writes nothing, so logs to files and pipes stay plain", "[monitoring]") {
  TempFile out;
  log::StatusLine status(out.file, false);
  status.show("step 1/4");
  status.write_above([&] { std::fputs("line\n", out.file); });
  status.clear();
  CHECK(contents_of(out.file) == "line\n");
  CHECK(!log::is_terminal(out.file));
  CHECK(log::terminal_columns(out.file) == 0);
}

TEST_CASE("progress bars fill in proportion and say the percentage", "[monitoring]") {
  CHECK(log::format_bar(0, 10, 10) == "[>         ]   0%");
  CHECK(log::format_bar(5, 10, 10) == "[=====>    ]  50%");
  CHECK(log::format_bar(10, 10, 10) == "[==========] 100%");
  CHECK(log::format_bar(3, 0, 4) == "[====] 100%");  // an empty phase is complete
  CHECK(log::format_phase_progress("tokenizing", 30, 120, 10.0) ==
        "tokenizing 30/120 [=====>              ]  25% | 10s elapsed | eta 30s");
  CHECK(log::format_training_progress(12, 300, 12.0, 288.0, 2.34111, 1e-3, 5123.4) ==
        "step 12/300 [>                   ]   4% | 12s elapsed | eta 4m48s | loss 2.3411 | lr 1.00e-03 | 5123 tok/s");
}

TEST_CASE("a phase's progress draws on the status line and clears it when it ends", "[monitoring]") {
  TempFile out;
  log::StatusLine status(out.file, true);
  {
    log::PhaseProgress phase("dpo", "reference log-probs", 4, status);
    phase.advance(2);
    CHECK_THAT(contents_of(out.file), Catch::EndsWith("[dpo] reference log-probs 2/4 [==========>         ]  50% | "
                                                      "0s elapsed | eta 0s"));
  }
  // Ended without finish() (as by an exception): the bar is gone.
  CHECK_THAT(contents_of(out.file), Catch::EndsWith("\r\033[K"));
}
