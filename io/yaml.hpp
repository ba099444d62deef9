// YAML → JSON for manifest.yaml (DESIGN §2: conversion lives in io/, the policy library only
// sees JSON values), and loading a manifest from either format.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "policy/manifest.hpp"
#include "policy/result.hpp"

namespace dhara::io {

/// Converts one YAML document to JSON. Quoted scalars stay strings; plain scalars become
/// true/false, integers and floats (decimal), null (`null`, `~`, empty), else strings.
/// Errors are errc::parse_error "SOURCE:LINE:COLUMN: …": syntax errors, non-scalar or
/// duplicate map keys, nesting deeper than 256, more than one document, invalid UTF-8, and
/// alias expansion far beyond the text's size. Never throws.
policy::result<nlohmann::json> yaml_to_json(std::string_view text, std::string_view source);

/// Parses manifest text, YAML (via yaml_to_json) or JSON, and validates it.
policy::result<policy::manifest> load_manifest_text(std::string_view text, bool yaml,
                                                    std::string_view source);

}  // namespace dhara::io
