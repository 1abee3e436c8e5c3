// The op names of the agent protocol (the "op" of an OPEN), shared by the
// host and the agent. The requests and answers of each op, as types, and
// the table documenting them are in messages.h.
#pragma once

#include <string_view>

namespace skiff::proto::op {
inline constexpr std::string_view kInfo = "info";
inline constexpr std::string_view kExec = "exec";
inline constexpr std::string_view kShutdown = "shutdown";
inline constexpr std::string_view kQuiesce = "quiesce";
inline constexpr std::string_view kClock = "clock";
inline constexpr std::string_view kUsage = "usage";
inline constexpr std::string_view kPortConnect = "port.connect";
inline constexpr std::string_view kFsLs = "fs.ls";
inline constexpr std::string_view kFsStat = "fs.stat";
inline constexpr std::string_view kFsMkdir = "fs.mkdir";
inline constexpr std::string_view kFsWrite = "fs.write";
inline constexpr std::string_view kFsRead = "fs.read";
inline constexpr std::string_view kFsRm = "fs.rm";
inline constexpr std::string_view kFsMv = "fs.mv";
inline constexpr std::string_view kFsChmod = "fs.chmod";
inline constexpr std::string_view kFsGrep = "fs.grep";
inline constexpr std::string_view kFsSed = "fs.sed";
inline constexpr std::string_view kFsWatch = "fs.watch";
inline constexpr std::string_view kProcStart = "proc.start";
inline constexpr std::string_view kProcList = "proc.list";
inline constexpr std::string_view kProcOutput = "proc.output";
inline constexpr std::string_view kProcInput = "proc.input";
inline constexpr std::string_view kProcSignal = "proc.signal";
inline constexpr std::string_view kProcWait = "proc.wait";
inline constexpr std::string_view kProcResize = "proc.resize";
inline constexpr std::string_view kProcForget = "proc.forget";
}  // namespace skiff::proto::op
