// `ptrain report`'s page: one self-contained HTML file (dygraphs and the page's
// script and style inlined, the data as JSON) that opens without network.
#pragma once

#include "core/report/run_data.h"

#include <string>
#include <vector>

namespace ptrain::report {

// Charts of every metric family (all runs overlaid), a summary table per run
// and each run's config. Run names must be unique (see unique_run_names).
std::string render_report(const std::vector<RunData>& runs);

// Appends " (2)", " (3)", ... to repeated run names, in order.
void make_run_names_unique(std::vector<RunData>& runs);

// &, <, >, " and ' as character references.
std::string escape_html(const std::string& text);

}  // namespace ptrain::report
