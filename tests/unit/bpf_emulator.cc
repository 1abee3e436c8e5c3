#include "bpf_emulator.h"

#include <cstddef>
#include <cstring>

namespace skiff::bpf {

seccomp_data SyscallData(uint32_t arch, int nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                         uint64_t a4, uint64_t a5) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = arch;
  d.instruction_pointer = 0x400000;
  d.args[0] = a0;
  d.args[1] = a1;
  d.args[2] = a2;
  d.args[3] = a3;
  d.args[4] = a4;
  d.args[5] = a5;
  return d;
}

namespace {

RunResult Fail(size_t pc, const std::string& what) {
  return {0, "instruction " + std::to_string(pc) + ": " + what};
}

}  // namespace

RunResult Run(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  if (prog.empty()) return Fail(0, "empty program");
  if (prog.size() > BPF_MAXINSNS) return Fail(0, "program longer than BPF_MAXINSNS");
  const size_t n = prog.size();
  uint32_t a = 0, x = 0;
  uint32_t mem[BPF_MEMWORDS] = {};
  size_t pc = 0;
  while (true) {
    if (pc >= n) return Fail(pc, "ran past the end of the program");
    const sock_filter& in = prog[pc];
    const uint32_t k = in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
      case BPF_LDX: {
        const bool to_x = BPF_CLASS(in.code) == BPF_LDX;
        uint32_t v = 0;
        if (BPF_MODE(in.code) == BPF_IMM) {
          v = k;
        } else if (BPF_MODE(in.code) == BPF_MEM) {
          if (k >= BPF_MEMWORDS) return Fail(pc, "scratch slot out of range");
          v = mem[k];
        } else if (BPF_MODE(in.code) == BPF_LEN) {
          v = sizeof(seccomp_data);
        } else if (!to_x && BPF_MODE(in.code) == BPF_ABS && BPF_SIZE(in.code) == BPF_W) {
          if (k % 4 != 0 || k > sizeof(seccomp_data) - 4)
            return Fail(pc, "load outside seccomp_data or misaligned");
          std::memcpy(&v, reinterpret_cast<const char*>(&data) + k, 4);
        } else {
          return Fail(pc, "unsupported load");
        }
        if (BPF_CLASS(in.code) == BPF_LD && BPF_SIZE(in.code) != BPF_W)
          return Fail(pc, "unsupported load size");
        (to_x ? x : a) = v;
        ++pc;
        break;
      }
      case BPF_ST:
      case BPF_STX:
        if (in.code != BPF_ST && in.code != BPF_STX) return Fail(pc, "unsupported store");
        if (k >= BPF_MEMWORDS) return Fail(pc, "scratch slot out of range");
        mem[k] = BPF_CLASS(in.code) == BPF_ST ? a : x;
        ++pc;
        break;
      case BPF_ALU: {
        const uint32_t src = BPF_SRC(in.code) == BPF_X ? x : k;
        switch (BPF_OP(in.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_MUL:
            a *= src;
            break;
          case BPF_DIV:
            if (src == 0) return Fail(pc, "division by zero");
            a /= src;
            break;
          case BPF_MOD:
            if (src == 0) return Fail(pc, "division by zero");
            a %= src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_XOR:
            a ^= src;
            break;
          case BPF_LSH:
            a = src >= 32 ? 0 : a << src;
            break;
          case BPF_RSH:
            a = src >= 32 ? 0 : a >> src;
            break;
          case BPF_NEG:
            a = 0u - a;
            break;
          default:
            return Fail(pc, "unknown ALU operation");
        }
        ++pc;
        break;
      }
      case BPF_JMP: {
        size_t next = pc + 1;
        if (BPF_OP(in.code) == BPF_JA) {
          if (k >= n - next) return Fail(pc, "jump past the end");
          pc = next + k;
          break;
        }
        const uint32_t src = BPF_SRC(in.code) == BPF_X ? x : k;
        bool taken;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            return Fail(pc, "unknown jump");
        }
        // Both targets must lie inside the program, whichever is taken.
        if (in.jt >= n - next || in.jf >= n - next) return Fail(pc, "jump past the end");
        pc = next + (taken ? in.jt : in.jf);
        break;
      }
      case BPF_RET:
        if (BPF_RVAL(in.code) == BPF_K) return {k, ""};
        if (BPF_RVAL(in.code) == BPF_A) return {a, ""};
        return Fail(pc, "unsupported return");
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) {
          x = a;
        } else if (BPF_MISCOP(in.code) == BPF_TXA) {
          a = x;
        } else {
          return Fail(pc, "unknown misc operation");
        }
        ++pc;
        break;
      default:
        return Fail(pc, "unknown instruction class");
    }
  }
}

}  // namespace skiff::bpf
