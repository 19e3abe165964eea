#include "hpcml/topology/planner.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "hpcml/common/strings.hpp"
#include "hpcml/topology/binding.hpp"

namespace hpcml::topology {

LinkModel LinkModel::Default() {
  // Effective (bus) bandwidths per GPU, not peak link rates: NVLink 4 on
  // H100 ~ 350 GB/s in NCCL all-reduce, PCIe 5 x16 ~ 40 GB/s through a switch,
  // less through the host bridge and across sockets; one 400 Gb/s NIC per
  // GPU ~ 40 GB/s but shared and with higher latency.
  LinkModel m;
  m.cost[static_cast<size_t>(LinkClass::kSelf)] = {0.0, 1e15};
  m.cost[static_cast<size_t>(LinkClass::kNvlink)] = {3e-6, 350e9};
  m.cost[static_cast<size_t>(LinkClass::kPcieSwitch)] = {5e-6, 40e9};
  m.cost[static_cast<size_t>(LinkClass::kHostBridge)] = {6e-6, 25e9};
  m.cost[static_cast<size_t>(LinkClass::kInterSocket)] = {8e-6, 15e9};
  m.cost[static_cast<size_t>(LinkClass::kNetwork)] = {15e-6, 20e9};
  return m;
}

std::int64_t Workload::num_params() const {
  std::int64_t p = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) p += widths[i] * widths[i + 1] + widths[i + 1];
  return p;
}

namespace {

// Where ranks go before the grid is known: ranks fill nodes in order, and
// within a node the devices are ordered so that consecutive runs of `tp`
// devices are the most tightly linked groups available.
struct Layout {
  bool cpu_only = false;
  int ranks_per_node = 0;
  std::vector<std::vector<int>> device_order;  // per node: gpu index of local rank i
};

LinkClass Slowest(LinkClass a, LinkClass b) {
  return a > b ? a : b;
}

// Greedy grouping: start each group with the lowest unused GPU, then add the
// GPU whose slowest link to the group so far is fastest (lowest index on ties).
std::vector<int> DeviceOrder(const NodeTopology& n, int tp) {
  int g = n.num_gpus();
  std::vector<int> order;
  std::vector<bool> used(static_cast<size_t>(g), false);
  int group = std::max(1, std::min(tp, g));
  while (static_cast<int>(order.size()) < g) {
    std::vector<int> members;
    for (int i = 0; i < g; ++i) {
      if (!used[static_cast<size_t>(i)]) {
        members.push_back(i);
        used[static_cast<size_t>(i)] = true;
        break;
      }
    }
    while (static_cast<int>(members.size()) < group &&
           static_cast<int>(order.size() + members.size()) < g) {
      int best = -1;
      LinkClass best_link = LinkClass::kNetwork;
      for (int c = 0; c < g; ++c) {
        if (used[static_cast<size_t>(c)]) continue;
        LinkClass worst = LinkClass::kSelf;
        for (int m : members) worst = Slowest(worst, n.Link(m, c));
        if (best < 0 || worst < best_link) {
          best = c;
          best_link = worst;
        }
      }
      members.push_back(best);
      used[static_cast<size_t>(best)] = true;
    }
    order.insert(order.end(), members.begin(), members.end());
  }
  return order;
}

struct Context {
  const ClusterTopology& cluster;
  const PlanRequest& req;
  int world = 0;
  Layout layout;
  int nvlink_domain = 0;  // largest tp whose groups are all NVLink on a node; 0 = no NVLink

  int NodeOf(int r) const { return r / layout.ranks_per_node; }
  int LocalOf(int r) const { return r % layout.ranks_per_node; }

  LinkClass Link(int a, int b) const {
    if (a == b) return LinkClass::kSelf;
    int na = NodeOf(a), nb = NodeOf(b);
    if (na != nb) return LinkClass::kNetwork;
    const NodeTopology& node = cluster.nodes[static_cast<size_t>(na)];
    if (layout.cpu_only) {
      // Ranks share a node's memory; across NUMA nodes the traffic crosses sockets.
      auto numa = [&](int r) {
        std::vector<int> cpus = CoresForRank(node, {LocalOf(r), layout.ranks_per_node}, -1);
        if (cpus.empty()) return 0;
        auto it = std::find(node.cores.begin(), node.cores.end(), cpus.front());
        return it == node.cores.end()
                   ? 0
                   : node.core_numa[static_cast<size_t>(it - node.cores.begin())];
      };
      return numa(a) == numa(b) ? LinkClass::kHostBridge : LinkClass::kInterSocket;
    }
    const auto& order = layout.device_order[static_cast<size_t>(na)];
    return node.Link(order[static_cast<size_t>(LocalOf(a))],
                     order[static_cast<size_t>(LocalOf(b))]);
  }

  // Slowest link inside the group {first + k*stride, k < count}.
  LinkClass GroupLink(int first, int stride, int count) const {
    if (count <= 1) return LinkClass::kSelf;
    int last = first + (count - 1) * stride;
    if (NodeOf(first) != NodeOf(last)) return LinkClass::kNetwork;
    LinkClass worst = LinkClass::kSelf;
    for (int i = 0; i < count; ++i) {
      for (int j = i + 1; j < count; ++j)
        worst = Slowest(worst, Link(first + i * stride, first + j * stride));
    }
    return worst;
  }
};

double AllReduce(const LinkCost& l, double bytes, int p) {
  if (p <= 1) return 0;
  return 2.0 * (p - 1) * (l.alpha_s + bytes / (p * l.beta_bytes_s));
}

double Message(const LinkCost& l, double bytes) {
  return l.alpha_s + bytes / l.beta_bytes_s;
}

// Why a shape cannot run, or "" when it can.
std::string Reject(const Context& ctx, int dp, int pp, int tp) {
  const auto& req = ctx.req;
  const auto& w = req.model.widths;
  if ((req.dp && req.dp != dp) || (req.pp && req.pp != pp) || (req.tp && req.tp != tp))
    return "degree fixed by the user";
  for (size_t i = 1; i + 1 < w.size(); ++i) {
    if (w[i] % tp != 0) return fmt::format("tp={} does not divide hidden width {}", tp, w[i]);
  }
  int layers = req.model.num_layers();
  int blocks = tp > 1 ? (layers + 1) / 2 : layers;
  if (pp > blocks)
    return fmt::format("pp={} exceeds the {} pipeline blocks of {} layers", pp, blocks, layers);
  int rpn = ctx.layout.ranks_per_node;
  // Tensor parallelism talks twice per layer pair: it stays inside a node,
  // and inside the NVLink domain when the node has one, unless the user
  // fixed tp (then the cost model still prices the slower links).
  if (req.tp == 0 && tp > rpn)
    return fmt::format("tp={} would cross nodes ({} ranks per node)", tp, rpn);
  if (req.tp == 0 && ctx.nvlink_domain > 0 && tp > ctx.nvlink_domain) {
    return fmt::format("tp={} would leave the NVLink domain of {} GPUs", tp, ctx.nvlink_domain);
  }
  if (!ctx.layout.cpu_only && rpn % tp != 0 && tp % rpn != 0) {
    return fmt::format("tp={} neither divides nor is a multiple of {} GPUs per node", tp, rpn);
  }
  if (req.model.global_batch % (static_cast<std::int64_t>(dp) * req.model.microbatches) != 0) {
    return fmt::format("batch {} not divisible by dp={} x {} microbatches", req.model.global_batch,
                       dp, req.model.microbatches);
  }
  return "";
}

CostBreakdown Estimate(const Context& ctx, int dp, int pp, int tp) {
  const Workload& m = ctx.req.model;
  const LinkModel& lm = ctx.req.links;
  CostBreakdown c;
  double params = static_cast<double>(m.num_params());
  double batch = static_cast<double>(m.global_batch);
  c.compute_s = 6.0 * params * batch / (ctx.world * m.flops_per_device) *
                (1.0 + double(pp - 1) / m.microbatches);

  // Slowest group of each kind over the whole grid.
  for (int r = 0; r < ctx.world; r += tp) c.tp_link = Slowest(c.tp_link, ctx.GroupLink(r, 1, tp));
  for (int d = 0; d < dp; ++d) {
    for (int t = 0; t < tp; ++t) {
      int base = d * pp * tp + t;
      for (int s = 0; s + 1 < pp; ++s)
        c.pp_link = Slowest(c.pp_link, ctx.Link(base + s * tp, base + (s + 1) * tp));
    }
  }
  for (int r = 0; r < pp * tp; ++r) c.dp_link = Slowest(c.dp_link, ctx.GroupLink(r, pp * tp, dp));

  double micro = batch / dp / m.microbatches;
  double hidden = 0;
  for (size_t i = 1; i + 1 < m.widths.size(); ++i) hidden = std::max(hidden, double(m.widths[i]));
  if (hidden == 0) hidden = double(m.widths.back());
  double act_bytes = micro * hidden * m.bytes_per_value;
  if (tp > 1) {
    int pairs = m.num_layers() / 2;
    int per_stage = (pairs + pp - 1) / pp;
    c.tp_s = m.microbatches * per_stage * 2.0 * AllReduce(lm[c.tp_link], act_bytes, tp);
  }
  if (pp > 1) c.pp_s = m.microbatches * 2.0 * Message(lm[c.pp_link], act_bytes);
  c.dp_s = AllReduce(lm[c.dp_link], params / (pp * tp) * 4.0, dp);
  return c;
}

Result<Context> MakeContext(const ClusterTopology& cluster, const PlanRequest& req) {
  if (cluster.nodes.empty()) return InvalidArgument("no nodes in the topology");
  if (req.model.widths.size() < 2)
    return InvalidArgument("model needs at least an input and an output width");
  for (auto w : req.model.widths) {
    if (w <= 0) return InvalidArgument("model width {} must be positive", w);
  }
  if (req.model.microbatches < 1) return InvalidArgument("microbatches must be >= 1");
  if (req.model.global_batch < 1) return InvalidArgument("global batch must be >= 1");
  const NodeTopology& first = cluster.nodes.front();
  for (const auto& n : cluster.nodes) {
    if (n.num_gpus() != first.num_gpus()) {
      return InvalidArgument(
          "nodes differ: {} has {} GPUs, {} has {} (mixed nodes are not planned)", first.hostname,
          first.num_gpus(), n.hostname, n.num_gpus());
    }
  }
  Context ctx{cluster, req, 0, {}};
  ctx.layout.cpu_only = first.num_gpus() == 0;
  int nodes = static_cast<int>(cluster.nodes.size());
  int capacity =
      ctx.layout.cpu_only ? nodes * static_cast<int>(first.cores.size()) : cluster.total_gpus();
  ctx.world = req.world > 0 ? req.world : capacity;
  if (!ctx.layout.cpu_only && ctx.world > capacity) {
    return InvalidArgument("{} ranks requested but the {} node(s) have {} GPUs", ctx.world, nodes,
                           capacity);
  }
  if (ctx.layout.cpu_only) {
    ctx.layout.ranks_per_node = (ctx.world + nodes - 1) / nodes;
  } else {
    ctx.layout.ranks_per_node = std::min(first.num_gpus(), ctx.world);
  }
  if (!ctx.layout.cpu_only) {
    for (int t = ctx.layout.ranks_per_node; t >= 2 && ctx.nvlink_domain == 0; --t) {
      if (ctx.layout.ranks_per_node % t != 0) continue;
      std::vector<int> order = DeviceOrder(first, t);
      bool all_nvlink = true;
      for (size_t g = 0; g + static_cast<size_t>(t) <= order.size(); g += static_cast<size_t>(t)) {
        for (int i = 0; i < t; ++i) {
          for (int j = i + 1; j < t; ++j) {
            all_nvlink =
                all_nvlink && first.Link(order[g + static_cast<size_t>(i)],
                                         order[g + static_cast<size_t>(j)]) == LinkClass::kNvlink;
          }
        }
      }
      if (all_nvlink) ctx.nvlink_domain = t;
    }
  }
  for (int f : {req.dp, req.pp, req.tp}) {
    if (f < 0)
      return InvalidArgument("parallel degrees must be >= 1 (or 0 to let the planner choose)");
    if (f > 0 && ctx.world % f != 0)
      return InvalidArgument("fixed degree {} does not divide the world of {} ranks", f, ctx.world);
  }
  int fixed = std::max(1, req.dp) * std::max(1, req.pp) * std::max(1, req.tp);
  if (req.dp && req.pp && req.tp && fixed != ctx.world) {
    return InvalidArgument("dp x pp x tp = {} x {} x {} = {} but the world has {} ranks", req.dp,
                           req.pp, req.tp, fixed, ctx.world);
  }
  if (ctx.world % fixed != 0) {
    return InvalidArgument(
        "the fixed degrees multiply to {}, which does not divide the world of {} ranks", fixed,
        ctx.world);
  }
  return ctx;
}

std::vector<RankPlacement> Place(const Context& ctx, int pp, int tp) {
  std::vector<RankPlacement> out;
  for (int r = 0; r < ctx.world; ++r) {
    RankPlacement p;
    p.rank = r;
    p.node = ctx.NodeOf(r);
    p.local_rank = ctx.LocalOf(r);
    p.tp_idx = r % tp;
    p.pp_idx = (r / tp) % pp;
    p.dp_idx = r / (tp * pp);
    const NodeTopology& n = ctx.cluster.nodes[static_cast<size_t>(p.node)];
    if (!ctx.layout.cpu_only)
      p.gpu =
          ctx.layout.device_order[static_cast<size_t>(p.node)][static_cast<size_t>(p.local_rank)];
    p.cpus = CoresForRank(n, {p.local_rank, ctx.layout.ranks_per_node}, p.gpu);
    if (!p.cpus.empty()) {
      auto it = std::find(n.cores.begin(), n.cores.end(), p.cpus.front());
      if (it != n.cores.end()) p.numa_node = n.core_numa[static_cast<size_t>(it - n.cores.begin())];
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string Ms(double s) {
  return fmt::format("{:.3f} ms", s * 1e3);
}

std::string Explain(const Candidate& best, const std::vector<Candidate>& all) {
  const CostBreakdown& b = best.cost;
  std::string s = fmt::format(
      "dp x pp x tp = {} x {} x {} wins: predicted {} per step (compute {}, tensor {} over {}, "
      "pipeline {} "
      "over {}, data {} over {}).",
      best.dp, best.pp, best.tp, Ms(b.total()), Ms(b.compute_s), Ms(b.tp_s), Name(b.tp_link),
      Ms(b.pp_s), Name(b.pp_link), Ms(b.dp_s), Name(b.dp_link));
  const Candidate* next = nullptr;
  for (const auto& c : all) {
    if (c.rejected.empty() && !(c.dp == best.dp && c.pp == best.pp && c.tp == best.tp)) {
      next = &c;
      break;
    }
  }
  if (next == nullptr) return s + " It is the only shape that fits.";
  const CostBreakdown& n = next->cost;
  struct Part {
    const char* what;
    double delta;
  } parts[] = {{"compute (pipeline bubble)", n.compute_s - b.compute_s},
               {"tensor-parallel all-reduces", n.tp_s - b.tp_s},
               {"pipeline messages", n.pp_s - b.pp_s},
               {"data-parallel all-reduce", n.dp_s - b.dp_s}};
  const Part* worst = &parts[0];
  for (const auto& p : parts) {
    if (p.delta > worst->delta) worst = &p;
  }
  double pct = b.total() > 0 ? 100.0 * (n.total() / b.total() - 1.0) : 0.0;
  return s + fmt::format(" Runner-up {} x {} x {} is {:.1f}% slower, mostly in {} (+{}).", next->dp,
                         next->pp, next->tp, pct, worst->what, Ms(worst->delta));
}

}  // namespace

Result<CostBreakdown> EstimateCost(const ClusterTopology& cluster, const PlanRequest& request,
                                   int dp, int pp, int tp) {
  // The shape is given, as if the user had fixed every degree.
  PlanRequest fixed = request;
  fixed.dp = dp;
  fixed.pp = pp;
  fixed.tp = tp;
  HPCML_ASSIGN_OR_RETURN(Context ctx, MakeContext(cluster, fixed));
  if (dp * pp * tp != ctx.world)
    return InvalidArgument("{} x {} x {} != world {}", dp, pp, tp, ctx.world);
  if (std::string why = Reject(ctx, dp, pp, tp); !why.empty()) return InvalidArgument("{}", why);
  for (const auto& n : cluster.nodes) ctx.layout.device_order.push_back(DeviceOrder(n, tp));
  return Estimate(ctx, dp, pp, tp);
}

Result<std::vector<std::int64_t>> ParseWidths(std::string_view text, std::string_view option) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  for (std::string_view item : SplitFields(text, ',')) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < 1) {
      return InvalidArgument("{} {}: '{}' is not a positive layer width", option, text, item);
    }
    out.push_back(v);
  }
  return out;
}

Result<Plan> MakePlan(const ClusterTopology& cluster, const PlanRequest& request) {
  HPCML_ASSIGN_OR_RETURN(Context ctx, MakeContext(cluster, request));
  std::vector<Candidate> cands;
  for (int tp = 1; tp <= ctx.world; ++tp) {
    if (ctx.world % tp) continue;
    // Device order depends on tp only; compute it once per tp.
    ctx.layout.device_order.clear();
    for (const auto& n : cluster.nodes) ctx.layout.device_order.push_back(DeviceOrder(n, tp));
    for (int pp = 1; pp <= ctx.world / tp; ++pp) {
      if ((ctx.world / tp) % pp) continue;
      Candidate c;
      c.tp = tp;
      c.pp = pp;
      c.dp = ctx.world / (tp * pp);
      c.rejected = Reject(ctx, c.dp, pp, tp);
      if (c.rejected == "degree fixed by the user") continue;
      if (c.rejected.empty()) c.cost = Estimate(ctx, c.dp, pp, tp);
      cands.push_back(std::move(c));
    }
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.rejected.empty() != b.rejected.empty()) return a.rejected.empty();
    if (!a.rejected.empty()) return false;
    double ta = a.cost.total(), tb = b.cost.total();
    if (std::abs(ta - tb) > 1e-12 * std::max(ta, tb)) return ta < tb;
    return std::tie(a.pp, a.tp) < std::tie(b.pp, b.tp);  // ties: fewer stages, then smaller tp
  });
  if (cands.empty() || !cands.front().rejected.empty()) {
    std::string why;
    for (size_t i = 0; i < cands.size() && i < 4; ++i) {
      why += fmt::format("{}{}x{}x{}: {}", i ? "; " : "", cands[i].dp, cands[i].pp, cands[i].tp,
                         cands[i].rejected);
    }
    return InvalidArgument("no dp x pp x tp layout fits {} ranks{}{}", ctx.world,
                           why.empty() ? "" : ": ", why);
  }
  Plan plan;
  const Candidate& best = cands.front();
  plan.dp = best.dp;
  plan.pp = best.pp;
  plan.tp = best.tp;
  plan.cost = best.cost;
  ctx.layout.device_order.clear();
  for (const auto& n : cluster.nodes) ctx.layout.device_order.push_back(DeviceOrder(n, best.tp));
  plan.ranks = Place(ctx, best.pp, best.tp);
  plan.reason = Explain(best, cands);
  plan.candidates = std::move(cands);
  return plan;
}

std::string FormatPlan(const ClusterTopology& cluster, const Plan& plan) {
  std::string s = fmt::format("plan: dp={} pp={} tp={} on {} rank(s)\n", plan.dp, plan.pp, plan.tp,
                              plan.ranks.size());
  s += fmt::format("why: {}\n", plan.reason);
  s += fmt::format("{:>5} {:>4} {:>4} {:>4}  {:<16} {:>4}  {:<12} {}\n", "rank", "dp", "pp", "tp",
                   "node", "gpu", "cores", "numa");
  for (const auto& r : plan.ranks) {
    s += fmt::format("{:>5} {:>4} {:>4} {:>4}  {:<16} {:>4}  {:<12} {}\n", r.rank, r.dp_idx,
                     r.pp_idx, r.tp_idx, cluster.nodes[static_cast<size_t>(r.node)].hostname,
                     r.gpu < 0 ? std::string("-") : std::to_string(r.gpu), FormatCpuList(r.cpus),
                     r.numa_node);
  }
  s += "candidates (predicted step time):\n";
  int shown = 0;
  for (const auto& c : plan.candidates) {
    if (shown++ == 8) break;
    if (c.rejected.empty()) {
      s += fmt::format("  {}x{}x{}  {}  (compute {}, tp {} [{}], pp {} [{}], dp {} [{}])\n", c.dp,
                       c.pp, c.tp, Ms(c.cost.total()), Ms(c.cost.compute_s), Ms(c.cost.tp_s),
                       Name(c.cost.tp_link), Ms(c.cost.pp_s), Name(c.cost.pp_link), Ms(c.cost.dp_s),
                       Name(c.cost.dp_link));
    } else {
      s += fmt::format("  {}x{}x{}  rejected: {}\n", c.dp, c.pp, c.tp, c.rejected);
    }
  }
  return s;
}

}  // namespace hpcml::topology
