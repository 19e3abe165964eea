// A small policy shared by the guard's unit tests.
#pragma once

namespace hpcml::guard::testing {

inline constexpr const char* kPolicy = R"(# test policy
[zones.ae]
description = "UAE"
[zones.eu]

[[datasets]]
path = "/data/ae"
zone = "ae"
classification = "internal"

[[datasets]]
path = "/data/ae/restricted"
zone = "ae"
classification = "restricted"

[[datasets]]
path = "/data/ae/fraud-*"
zone = "ae"
classification = "restricted"

[[datasets]]
path = "/data/eu"
zone = "eu"
classification = "internal"

[[roles]]
name = "ml-engineer"
zones = ["ae", "eu"]
classifications = ["internal"]
max_gpus = 4
partitions = ["batch"]

[[roles]]
name = "fraud-analyst"
zones = ["ae"]
classifications = ["internal", "restricted"]
max_gpus = 1

[[roles]]
name = "reader"
zones = ["ae"]
classifications = ["internal"]
max_gpus = 0

[[bindings]]
user = "alice"
roles = ["ml-engineer", "reader"]

[[bindings]]
group = "fraud"
roles = ["fraud-analyst"]

[[bindings]]
account = "hpcml-ml"
roles = ["reader"]

[defaults]
role = "reader"
unknown_datasets = "deny"
)";

}  // namespace hpcml::guard::testing
