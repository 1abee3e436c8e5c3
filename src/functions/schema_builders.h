// The vocabulary the function schemas are written in (functions/schemas.h):
// draft-07 property builders that always carry a description, the root
// object with its examples and the shared definitions it refers to, and
// the properties several functions share.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::fn {

nlohmann::json Str(std::string d);
nlohmann::json Bool(std::string d);
nlohmann::json BoolD(std::string d, bool def);
nlohmann::json Int(std::string d);
nlohmann::json UInt(std::string d);
nlohmann::json UIntD(std::string d, uint64_t def);
nlohmann::json StrArr(std::string d);
nlohmann::json StrArrD(std::string d);
// A property that is shared definition `def` ("#/definitions/<def>").
nlohmann::json Ref(std::string_view def, std::string d);
nlohmann::json ArrOf(std::string_view def, std::string d);
nlohmann::json WithDefault(nlohmann::json j, nlohmann::json def);
nlohmann::json Object(std::string d, nlohmann::json props, const std::vector<std::string>& required);
// A function's request or response schema: `obj` with $schema, title and
// examples, the definitions it refers to, and (requests) null accepted for
// every optional field.
nlohmann::json Root(std::string_view title, nlohmann::json obj, nlohmann::json examples, bool request);

extern const std::string kUuidEx;  // the sandbox id of the examples
nlohmann::json SandboxIdProp();
nlohmann::json Path(std::string d);
nlohmann::json ModeProp(std::string d, std::string_view def);
nlohmann::json EnvProp(std::string d);

}  // namespace skiff::fn
