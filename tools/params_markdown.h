// docs/ENVIRONMENT.md, generated: every ZCOLL_* parameter of the table (base/params.h) with its
// default and description, and the other environment variables zcoll reads, as one Markdown page.
//   build/tools/zcoll_info --params-markdown > docs/ENVIRONMENT.md
// tests/scripts/environment_page.sh fails when the committed page differs from this output.
#pragma once

#include <string>

namespace zcoll {

// The whole page. Depends on the table only (never on the environment or the build), so every
// build generates the same bytes.
std::string environmentPageMarkdown();

}  // namespace zcoll
