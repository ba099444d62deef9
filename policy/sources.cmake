# The pure policy library's sources, shared by the main build and the clang fuzz build.
set(DHARA_POLICY_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/result.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/decision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/capability.cpp
  ${CMAKE_CURRENT_LIST_DIR}/level.cpp
  ${CMAKE_CURRENT_LIST_DIR}/path_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/net_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/command_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/settings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/manifest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/permissions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/audit_entry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/snapshot.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tool_gate.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sandbox_profile.cpp)
