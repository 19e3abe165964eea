// ExportGbdtOnnx (onnx_export.hpp): XGBoost's trees, read from the booster's
// JSON dump, as ai.onnx.ml's TreeEnsembleClassifier / Regressor.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/xgb.hpp"
#include "onnx_export.hpp"
#include "onnx_graph.hpp"

namespace hpcml::inference {
namespace {

using nlohmann::json;

// More nodes than this (categorical chains repeat subtrees) is refused.
constexpr std::size_t kMaxNodes = std::size_t{1} << 24;

// The booster as XGBoost's JSON model.
Result<json> BoosterJson(const std::string& ubjson) {
  HPCML_ASSIGN_OR_RETURN(trees::Booster b, trees::LoadBooster(ubjson));
  bst_ulong len = 0;
  const char* buf = nullptr;
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGBoosterSaveModelToBuffer(b.get(), R"({"format": "json"})", &len, &buf), "JSON dump"));
  std::string_view raw(buf, len);
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  // XGBoost writes NaN and Infinity as bare words (a categorical node's
  // split condition is NaN), which JSON has not: null instead, outside
  // strings.
  std::string text;
  text.reserve(raw.size());
  bool quoted = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (quoted) {
      text += c;
      if (c == '\\' && i + 1 < raw.size()) text += raw[++i];
      if (c == '"') quoted = false;
      continue;
    }
    if (c == '"') quoted = true;
    bool replaced = false;
    for (std::string_view word : {"NaN", "-Infinity", "Infinity"}) {
      if (raw.substr(i).starts_with(word)) {
        text += "null";
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) text += c;
  }
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    return Internal("XGBoost's JSON dump of the booster does not parse: {}", e.what());
  }
}

// XGBoost writes numbers in its JSON as numbers, and some parameters as
// strings ("5E-1").
double Number(const json& v) {
  return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>();
}

// One XGBoost tree (its JSON arrays), and the category set of each
// categorical split node.
struct XgbTree {
  std::vector<std::int64_t> left, right, feature;
  std::vector<float> value;  // split condition, or a leaf's weight
  std::vector<int> default_left, split_type;
  std::vector<std::vector<std::int64_t>> categories;  // by node; categorical splits only

  static Result<XgbTree> From(const json& t) {
    XgbTree x;
    try {
      x.left = t.at("left_children").get<std::vector<std::int64_t>>();
      x.right = t.at("right_children").get<std::vector<std::int64_t>>();
      x.feature = t.at("split_indices").get<std::vector<std::int64_t>>();
      for (const json& v : t.at("split_conditions"))  // null: NaN (BoosterJson)
        x.value.push_back(v.is_null() ? std::numeric_limits<float>::quiet_NaN() : v.get<float>());
      x.default_left = t.at("default_left").get<std::vector<int>>();
      x.split_type = t.value("split_type", std::vector<int>(x.left.size(), 0));
      const auto nodes = t.value("categories_nodes", std::vector<std::int64_t>{});
      const auto segments = t.value("categories_segments", std::vector<std::int64_t>{});
      const auto sizes = t.value("categories_sizes", std::vector<std::int64_t>{});
      const auto cats = t.value("categories", std::vector<std::int64_t>{});
      x.categories.resize(x.left.size());
      for (std::size_t k = 0; k < nodes.size(); ++k) {
        const auto first = cats.begin() + segments.at(k);
        x.categories.at(static_cast<std::size_t>(nodes[k])).assign(first, first + sizes.at(k));
      }
    } catch (const std::exception& e) {
      return Internal("XGBoost's JSON tree is not as expected: {}", e.what());
    }
    const std::size_t n = x.left.size();
    if (x.right.size() != n || x.feature.size() != n || x.value.size() != n ||
        x.default_left.size() != n || x.split_type.size() != n)
      return Internal("XGBoost's JSON tree has arrays of different lengths");
    return x;
  }
};

// The ensemble as TreeEnsemble attributes: nodes, and leaves' weights.
class Ensemble {
 public:
  explicit Ensemble(std::int64_t features) : features_(features) {}

  // Adds tree `tree` (its id in the ensemble) whose leaves add to output
  // `target`.
  Status Add(const XgbTree& t, std::int64_t tree, std::int64_t target) {
    next_ = 0;
    return Emit(t, 0, tree, target).status();
  }

  std::size_t nodes() const { return modes_.size(); }
  // The attributes on a TreeEnsembleClassifier ("class_") or Regressor
  // ("target_") node.
  void SetAttributes(onnx::NodeProto* n, const std::string& leaf_prefix) const {
    SetIntsAttr(n, "nodes_treeids", treeids_);
    SetIntsAttr(n, "nodes_nodeids", nodeids_);
    SetIntsAttr(n, "nodes_featureids", featureids_);
    SetFloatsAttr(n, "nodes_values", values_);
    SetStringsAttr(n, "nodes_modes", modes_);
    SetIntsAttr(n, "nodes_truenodeids", true_);
    SetIntsAttr(n, "nodes_falsenodeids", false_);
    SetIntsAttr(n, "nodes_missing_value_tracks_true", missing_true_);
    SetIntsAttr(n, leaf_prefix + "treeids", leaf_tree_);
    SetIntsAttr(n, leaf_prefix + "nodeids", leaf_node_);
    SetIntsAttr(n, leaf_prefix + "ids", leaf_target_);
    SetFloatsAttr(n, leaf_prefix + "weights", leaf_weight_);
  }

 private:
  std::size_t NewNode(std::int64_t tree, const char* mode) {
    treeids_.push_back(tree);
    nodeids_.push_back(next_++);
    featureids_.push_back(0);
    values_.push_back(0.0f);
    modes_.push_back(mode);
    true_.push_back(0);
    false_.push_back(0);
    missing_true_.push_back(0);
    return modes_.size() - 1;
  }

  // XGBoost node `k` and its subtree; returns the ONNX id of its root.
  Result<std::int64_t> Emit(const XgbTree& t, std::int64_t k, std::int64_t tree,
                            std::int64_t target) {
    if (modes_.size() > kMaxNodes)
      return InvalidArgument("more than {} tree nodes once categorical splits are unrolled",
                             kMaxNodes);
    const auto u = static_cast<std::size_t>(k);
    if (u >= t.left.size()) return Internal("XGBoost tree node {} out of range", k);
    if (t.left[u] < 0) {
      const std::size_t at = NewNode(tree, "LEAF");
      leaf_tree_.push_back(tree);
      leaf_node_.push_back(nodeids_[at]);
      leaf_target_.push_back(target);
      leaf_weight_.push_back(t.value[u]);
      return nodeids_[at];
    }
    if (t.feature[u] < 0 || t.feature[u] >= features_)
      return Internal("XGBoost tree node {} splits on feature {} of {}", k, t.feature[u],
                      features_);
    if (t.split_type[u] == 0) {  // x < value: left; missing: default_left
      const std::size_t at = NewNode(tree, "BRANCH_LT");
      HPCML_ASSIGN_OR_RETURN(const std::int64_t l, Emit(t, t.left[u], tree, target));
      HPCML_ASSIGN_OR_RETURN(const std::int64_t r, Emit(t, t.right[u], tree, target));
      featureids_[at] = t.feature[u];
      values_[at] = t.value[u];
      true_[at] = l;
      false_[at] = r;
      missing_true_[at] = t.default_left[u];
      return nodeids_[at];
    }
    // Categorical: a category in the node's set goes right, any other value
    // left, a missing one as default_left says (XGBoost's Decision). As a
    // chain x == c1 ? right : x == c2 ? right : ... : left, the right
    // subtree repeated for each category; a missing value follows the first
    // node's missing branch to the right, or falls through to the left.
    const std::vector<std::int64_t>& cats = t.categories[u];
    if (cats.empty()) return Internal("XGBoost tree node {} is categorical with no categories", k);
    std::int64_t first = -1;
    std::size_t prev = 0;
    for (std::size_t c = 0; c < cats.size(); ++c) {
      const std::size_t at = NewNode(tree, "BRANCH_EQ");
      if (c == 0) {
        first = nodeids_[at];
        missing_true_[at] = t.default_left[u] ? 0 : 1;
      } else {
        false_[prev] = nodeids_[at];
      }
      featureids_[at] = t.feature[u];
      values_[at] = static_cast<float>(cats[c]);
      HPCML_ASSIGN_OR_RETURN(true_[at], Emit(t, t.right[u], tree, target));
      prev = at;
    }
    HPCML_ASSIGN_OR_RETURN(false_[prev], Emit(t, t.left[u], tree, target));
    return first;
  }

  std::int64_t features_;
  std::int64_t next_ = 0;
  std::vector<std::int64_t> treeids_, nodeids_, featureids_, true_, false_, missing_true_;
  std::vector<float> values_;
  std::vector<std::string> modes_;
  std::vector<std::int64_t> leaf_tree_, leaf_node_, leaf_target_;
  std::vector<float> leaf_weight_;
};

// The graph's own value names: inputs named after features avoid them.
std::set<std::string> GbdtOwnNames() {
  return {"numbers", "numbers_f64",   "numbers_scaled_f64", "numbers_scaled", "row",  "features",
          "label",   "probabilities", "predictions",        "row_order",      "mean", "scale"};
}

// The inputs to XGBoost's row: numbers (standardised first where the
// training version was, in double as the derive did), each category's
// value to its vocabulary index (anything else missing), in feature order.
Status BuildRow(const trees::GbdtModelFile& m, onnx::GraphProto& g) {
  const trainer::InputEncoding& enc = *m.lineage.input.encoding;
  const trainer::InputSchema& in = m.lineage.input;
  const std::vector<OnnxInput> inputs = EncodedInputs(enc, GbdtOwnNames());
  std::vector<std::string> parts;
  // Where each concatenated column comes from: numbers first, then the
  // categories, each in feature order; row_order puts them back.
  std::vector<std::int64_t> number_cols, category_cols;
  for (std::size_t j = 0; j < enc.columns.size(); ++j)
    (enc.columns[j].category() ? category_cols : number_cols)
        .push_back(static_cast<std::int64_t>(j));
  if (!number_cols.empty()) {
    SetMatrixType(g.add_input(), "numbers", static_cast<std::int64_t>(number_cols.size()));
    std::string x = "numbers";
    if (in.any_standardized()) {
      std::vector<double> mean, scale;
      for (std::int64_t j : number_cols) {
        const auto k = static_cast<std::size_t>(j);
        const bool s = in.standardized[k];
        mean.push_back(s ? in.mean[k] : 0.0);
        scale.push_back(s ? in.scale[k] : 1.0);
      }
      const auto n = static_cast<std::int64_t>(mean.size());
      AddInitializer(g, "mean", {n}, mean);
      AddInitializer(g, "scale", {n}, scale);
      SetIntAttr(AddNode(g, "Cast", {x}, "numbers_f64"), "to", onnx::TensorProto::DOUBLE);
      AddNode(g, "Sub", {"numbers_f64", "mean"}, "numbers_centered_f64");
      AddNode(g, "Div", {"numbers_centered_f64", "scale"}, "numbers_scaled_f64");
      SetIntAttr(AddNode(g, "Cast", {"numbers_scaled_f64"}, "numbers_scaled"), "to",
                 onnx::TensorProto::FLOAT);
      x = "numbers_scaled";
    }
    parts.push_back(x);
  }
  std::size_t next_input = number_cols.empty() ? 0 : 1;
  for (std::int64_t j : category_cols) {
    const trainer::ColumnEncoding& c = enc.columns[static_cast<std::size_t>(j)];
    const OnnxInput& input = inputs.at(next_input++);
    SetMatrixType(g.add_input(), input.name, 1, onnx::TensorProto::STRING);
    // LabelEncoder needs a key: an empty vocabulary maps "" to missing too.
    std::vector<std::string> keys = c.vocabulary;
    std::vector<float> codes;
    for (std::size_t i = 0; i < keys.size(); ++i) codes.push_back(static_cast<float>(i));
    if (keys.empty()) {
      keys.push_back("");
      codes.push_back(std::numeric_limits<float>::quiet_NaN());
    }
    const std::string code = input.name + ".code";
    onnx::NodeProto* lookup = AddNode(g, "LabelEncoder", {input.name}, code);
    lookup->set_domain(kOnnxMlDomain);
    SetStringsAttr(lookup, "keys_strings", keys);
    SetFloatsAttr(lookup, "values_floats", codes);
    SetFloatAttr(lookup, "default_float", std::numeric_limits<float>::quiet_NaN());
    parts.push_back(code);
  }
  onnx::NodeProto* concat = g.add_node();
  concat->set_op_type("Concat");
  concat->set_name("row.concat");
  for (const std::string& p : parts) concat->add_input(p);
  concat->add_output("row");
  SetIntAttr(concat, "axis", 1);
  // Column j of XGBoost's row is column order[j] of the concatenation.
  std::vector<std::int64_t> order(enc.columns.size());
  for (std::size_t i = 0; i < number_cols.size(); ++i)
    order[static_cast<std::size_t>(number_cols[i])] = static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < category_cols.size(); ++i)
    order[static_cast<std::size_t>(category_cols[i])] =
        static_cast<std::int64_t>(number_cols.size() + i);
  AddInitializer(g, "row_order", {static_cast<std::int64_t>(order.size())}, order);
  SetIntAttr(AddNode(g, "Gather", {"row", "row_order"}, "features"), "axis", 1);
  return Status::Ok();
}

Result<onnx::ModelProto> BuildGbdtModel(const trees::GbdtModelFile& m) {
  if (!m.lineage.input.encoding)
    return InvalidArgument("the model has no input encoding (written before encodings)");
  const trainer::InputEncoding& enc = *m.lineage.input.encoding;
  HPCML_RETURN_IF_ERROR(enc.Validate("the input encoding"));
  HPCML_ASSIGN_OR_RETURN(json booster, BoosterJson(m.booster));
  const json& learner = booster.at("learner");
  const json& param = learner.at("learner_model_param");
  const auto features = static_cast<std::int64_t>(Number(param.at("num_feature")));
  if (features != static_cast<std::int64_t>(enc.columns.size()))
    return InvalidArgument("the booster takes {} features, the input encoding has {}", features,
                           enc.columns.size());
  const double base_score = Number(param.at("base_score"));
  const json& model = learner.at("gradient_booster").at("model");
  const auto tree_info = model.at("tree_info").get<std::vector<std::int64_t>>();
  const json& trees_json = model.at("trees");
  if (tree_info.size() != trees_json.size())
    return Internal("XGBoost's JSON has {} trees but {} tree_info entries", trees_json.size(),
                    tree_info.size());
  const bool multi = m.objective == "multi:softprob";
  const bool binary = m.objective == "binary:logistic";
  const std::int64_t classes = multi ? m.outputs : (binary ? 2 : 0);
  Ensemble ensemble(features);
  for (std::size_t i = 0; i < trees_json.size(); ++i) {
    HPCML_ASSIGN_OR_RETURN(XgbTree t, XgbTree::From(trees_json[i]));
    if (tree_info[i] < 0 || (multi && tree_info[i] >= classes) || (!multi && tree_info[i] != 0))
      return Internal("XGBoost tree {} adds to output {}", i, tree_info[i]);
    HPCML_RETURN_IF_ERROR(ensemble.Add(t, static_cast<std::int64_t>(i), tree_info[i]));
  }

  onnx::ModelProto mp = NewOnnxModel(
      "hpcml GBDT (" + m.objective + ") exported from " + m.path + " (sha256 " + m.sha256 + ")",
      /*ml=*/true);
  onnx::GraphProto* g = mp.mutable_graph();
  g->set_name("hpcml_gbdt");
  HPCML_RETURN_IF_ERROR(BuildRow(m, *g));
  if (classes > 0) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("TreeEnsembleClassifier");
    n->set_domain(kOnnxMlDomain);
    n->set_name("trees");
    n->add_input("features");
    n->add_output("label");
    n->add_output("probabilities");
    ensemble.SetAttributes(n, "class_");
    std::vector<std::int64_t> labels;
    for (std::int64_t c = 0; c < classes; ++c) labels.push_back(c);
    SetIntsAttr(n, "classlabels_int64s", labels);
    if (binary) {
      // One score, the margin: base_score is a probability for logistic.
      SetFloatsAttr(n, "base_values",
                    {static_cast<float>(std::log(base_score / (1.0 - base_score)))});
      SetStringAttr(n, "post_transform", "LOGISTIC");
    } else {
      SetFloatsAttr(
          n, "base_values",
          std::vector<float>(static_cast<std::size_t>(classes), static_cast<float>(base_score)));
      SetStringAttr(n, "post_transform", "SOFTMAX");
    }
    SetMatrixType(g->add_output(), "probabilities", classes);
  } else {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("TreeEnsembleRegressor");
    n->set_domain(kOnnxMlDomain);
    n->set_name("trees");
    n->add_input("features");
    n->add_output("predictions");
    ensemble.SetAttributes(n, "target_");
    SetIntAttr(n, "n_targets", 1);
    SetFloatsAttr(n, "base_values", {static_cast<float>(base_score)});
    SetStringAttr(n, "post_transform", "NONE");
    SetMatrixType(g->add_output(), "predictions", 1);
  }
  AddMetadata(mp, "hpcml.source_model", m.path);
  AddMetadata(mp, "hpcml.model_sha256", m.sha256);
  AddMetadata(mp, "hpcml.objective", m.objective);
  AddMetadata(mp, "hpcml.lineage", trainer::LineageJson(m.lineage));
  AddInputsMetadata(mp, GbdtOnnxInputs(m));
  return mp;
}

}  // namespace

std::vector<OnnxInput> GbdtOnnxInputs(const trees::GbdtModelFile& model) {
  if (!model.lineage.input.encoding) return {};
  return EncodedInputs(*model.lineage.input.encoding, GbdtOwnNames());
}

Status ExportGbdtOnnx(const trees::GbdtModelFile& model, const std::string& path) {
  const std::string context = "ONNX export of " + model.path + " to " + path;
  auto built = BuildGbdtModel(model);
  if (!built.ok()) return std::move(built).status().WithContext(context).At();
  return CheckAndWrite(*built, path, context);
}

}  // namespace hpcml::inference
