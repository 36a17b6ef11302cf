// Progress of a long run on stderr: on a terminal, one status line rewritten in place
// ("qwen-pages [2/7]: case 5/12 qwen-pages(fmt=fp8,...) (14.2 s)": contract, case i/n,
// elapsed); elsewhere (a CI log, a pipe, a file) plain lines, one per update, as they were
// before ("  .. case 5/12 qwen-pages(...)": the case line last, ready to paste into --case).
// KC_PROGRESS=live or KC_PROGRESS=plain overrides the terminal test.
#pragma once
#include <string>

namespace kc::progress {

// True when updates rewrite one line in place (stderr is a terminal, TERM is not "dumb",
// or KC_PROGRESS=live), false for plain lines.
bool live();
// Starts a run's status: `label` prefixes every update (e.g. "qwen-pages [2/7]"), the
// elapsed time counts from now.
void begin(const std::string& label);
// One update: on a terminal the status line is replaced (cut to the terminal's width);
// otherwise "  .. <what>" on a line of its own.
void update(const std::string& what);
// Clears the status line (on a terminal) so that a line printed next starts at column 0;
// call before printing anything else on stderr while a status may be shown.
void clear();
// Ends the run's status: the line is cleared.
void end();

// The status text for `what` after `elapsed_s` seconds (what update prints, without the
// terminal control codes), cut to `width` characters when width > 0.
std::string status_text(const std::string& label, const std::string& what, double elapsed_s, int width);

}  // namespace kc::progress
