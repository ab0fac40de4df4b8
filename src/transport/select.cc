#include "transport/select.h"

#include <map>

namespace zcoll {

Result selectRoutes(const std::vector<Transport*>& byPriority, const std::vector<PeerReach>& peers,
                    std::vector<Route>* routes, const char* noneWhy) {
  routes->assign(peers.size(), Route{});
  for (size_t p = 0; p < peers.size(); ++p) {
    std::string refusals, firstRefusal;
    bool refused = false;
    for (Transport* t : byPriority) {
      std::string why;
      if (t->canConnect(peers[p], &why)) {
        if (why.empty() && refused) why = firstRefusal;
        (*routes)[p] = Route{t, std::string(t->name()) + " (" + why + ")"};
        break;
      }
      if (!refused) firstRefusal = why;
      refused = true;
      refusals += std::string(refusals.empty() ? "" : "; ") + t->name() + ": " + why;
    }
    if ((*routes)[p].transport == nullptr && noneWhy != nullptr)
      (*routes)[p] = Route{nullptr, std::string("none (") + noneWhy + ")"};
    else if ((*routes)[p].transport == nullptr)
      return fail(zcollSystemError, "no transport can reach rank %zu (%s)", p,
                  refusals.empty() ? "no transports" : refusals.c_str());
  }
  return zcollSuccess;
}

namespace {

// "0-2,5,7-8"
std::string rankRanges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> summarizeRoutes(const std::vector<Route>& routes) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // in order of first rank
  std::map<std::string, size_t> groupOf;
  for (size_t p = 0; p < routes.size(); ++p) {
    auto it = groupOf.emplace(routes[p].why, groups.size()).first;
    if (it->second == groups.size()) groups.push_back({routes[p].why, {}});
    groups[it->second].second.push_back(static_cast<int>(p));
  }
  std::vector<std::string> lines;
  for (const auto& [why, ranks] : groups)
    lines.push_back(std::string("rank") + (ranks.size() > 1 ? "s " : " ") + rankRanges(ranks) +
                    " -> " + why);
  return lines;
}

}  // namespace zcoll
