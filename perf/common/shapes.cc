// The shapes of the standard collectives (driver.h): count math, bus factor, inputs and expected
// values. No zcoll call here: perf/peers/nccl_coll_bench.cc measures NCCL with the same shapes.
#include "common/driver.h"

namespace zcoll {
namespace perf {

Collective allGatherShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    Counts k;
    k.count = elems / n;
    k.sendElems = k.count;
    k.recvElems = k.count * n;
    k.sendInPlace = k.count * rank;  // in place: this rank's slot of the output
    return k;
  };
  c.input = [](const Pattern&, int rank, size_t i) { return movedValue(rank, i); };
  c.expected = [](const Pattern& p, int, size_t i) {
    return movedValue(int(i / p.count), i % p.count);
  };
  return c;
}

Collective reduceScatterShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.reduces = true;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    Counts k;
    k.count = elems / n;
    k.sendElems = k.count * n;
    k.recvElems = k.count;
    k.recvInPlace = k.count * rank;  // in place: this rank's slot of the input
    return k;
  };
  c.input = reduceInput;
  c.expected = [](const Pattern& p, int rank, size_t i) {
    return reduceResult(p, size_t(rank) * p.count + i);
  };
  return c;
}

Collective allReduceShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.reduces = true;
  c.busFactor = [](int n) { return 2.0 * (n - 1) / n; };
  c.counts = [](size_t elems, int, int) {
    Counts k;
    k.count = k.sendElems = k.recvElems = elems;
    return k;
  };
  c.input = reduceInput;
  c.expected = [](const Pattern& p, int, size_t i) { return reduceResult(p, i); };
  return c;
}

Collective allToAllShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.inPlace = false;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int) {
    Counts k;
    k.count = elems / n;
    k.sendElems = k.recvElems = k.count * n;
    return k;
  };
  c.input = [](const Pattern&, int rank, size_t i) { return movedValue(rank, i); };
  // Chunk p of rank q's output is chunk q of rank p's input.
  c.expected = [](const Pattern& p, int rank, size_t i) {
    size_t from = i / p.count, offset = i % p.count;
    return movedValue(int(from), size_t(rank) * p.count + offset);
  };
  return c;
}

Collective sendRecvShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.inPlace = false;
  c.busFactor = [](int) { return 1.0; };
  c.counts = [](size_t elems, int, int) {
    Counts k;
    k.count = k.sendElems = k.recvElems = elems;
    return k;
  };
  c.input = [](const Pattern&, int rank, size_t i) { return movedValue(rank, i); };
  c.expected = [](const Pattern& p, int rank, size_t i) {
    return movedValue((rank - 1 + p.nranks) % p.nranks, i);
  };
  return c;
}

}  // namespace perf
}  // namespace zcoll
