// The study's markdown: the grid's table and answers, and the whole report around the JSON of a run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dllm::study {

// printf of one number ("%.1f").
std::string fmt(const char* format, double value);

// The grid's rows sorted by speed, then one line per answer ("within X points of exact").
std::string grid_markdown(const nlohmann::json& rows, const nlohmann::json& answers, double exact_accuracy);

// The report of a run_study JSON (`grid_md`: run_grid's markdown).
std::string report_markdown(const nlohmann::json& out, const std::string& grid_md);

}  // namespace dllm::study
