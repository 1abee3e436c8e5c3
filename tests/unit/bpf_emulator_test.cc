// The test BPF interpreter on hand-built programs: each instruction class,
// and every malformed program is an error.
#include "bpf_emulator.h"

#include <gtest/gtest.h>
#include <linux/audit.h>

namespace skiff::bpf {
namespace {

constexpr uint32_t kNr = offsetof(seccomp_data, nr);
constexpr uint32_t kArch = offsetof(seccomp_data, arch);
constexpr uint32_t kArg0Lo = offsetof(seccomp_data, args[0]);
constexpr uint32_t kArg0Hi = kArg0Lo + 4;

sock_filter S(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter J(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

const seccomp_data kData = SyscallData(AUDIT_ARCH_X86_64, 42, 0x1122334455667788ull, 7);

RunResult R(std::vector<sock_filter> p, const seccomp_data& d = kData) { return Run(p, d); }

TEST(BpfEmulator, LoadsEveryWordOfSeccompData) {
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_ABS, kNr), S(BPF_RET | BPF_A, 0)}).verdict, 42u);
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_ABS, kArch), S(BPF_RET | BPF_A, 0)}).verdict,
            uint32_t{AUDIT_ARCH_X86_64});
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_ABS, kArg0Lo), S(BPF_RET | BPF_A, 0)}).verdict, 0x55667788u);
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_ABS, kArg0Hi), S(BPF_RET | BPF_A, 0)}).verdict, 0x11223344u);
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_ABS, sizeof(seccomp_data) - 4), S(BPF_RET | BPF_A, 0)}).ok(), true);
  EXPECT_EQ(R({S(BPF_LD | BPF_W | BPF_LEN, 0), S(BPF_RET | BPF_A, 0)}).verdict,
            uint32_t{sizeof(seccomp_data)});
  EXPECT_EQ(R({S(BPF_LD | BPF_IMM, 9), S(BPF_RET | BPF_A, 0)}).verdict, 9u);
}

TEST(BpfEmulator, OutOfRangeLoadsAreErrors) {
  EXPECT_FALSE(R({S(BPF_LD | BPF_W | BPF_ABS, sizeof(seccomp_data)), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_LD | BPF_W | BPF_ABS, 0xfffffffc), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_LD | BPF_W | BPF_ABS, 2), S(BPF_RET | BPF_K, 0)}).ok());  // misaligned
  EXPECT_FALSE(R({S(BPF_LD | BPF_H | BPF_ABS, 0), S(BPF_RET | BPF_K, 0)}).ok());  // not a word
  EXPECT_FALSE(R({S(BPF_LD | BPF_W | BPF_IND, 0), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_LD | BPF_MEM, BPF_MEMWORDS), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_ST, BPF_MEMWORDS), S(BPF_RET | BPF_K, 0)}).ok());
}

TEST(BpfEmulator, ScratchMemoryAndRegisters) {
  // A=5; M[3]=A; X=M[3]; A=X+1 via TXA and ADD; return A.
  EXPECT_EQ(R({S(BPF_LD | BPF_IMM, 5), S(BPF_ST, 3), S(BPF_LDX | BPF_MEM, 3), S(BPF_MISC | BPF_TXA, 0),
               S(BPF_ALU | BPF_ADD | BPF_K, 1), S(BPF_RET | BPF_A, 0)})
                .verdict,
            6u);
  // X=4; STX M[0]; A=M[0]; TAX; A=X*A.
  EXPECT_EQ(R({S(BPF_LDX | BPF_IMM, 4), S(BPF_STX, 0), S(BPF_LD | BPF_MEM, 0), S(BPF_MISC | BPF_TAX, 0),
               S(BPF_ALU | BPF_MUL | BPF_X, 0), S(BPF_RET | BPF_A, 0)})
                .verdict,
            16u);
}

TEST(BpfEmulator, AluOperations) {
  auto alu = [](uint32_t a, uint16_t op, uint32_t k) {
    return R({S(BPF_LD | BPF_IMM, a), S(BPF_ALU | op | BPF_K, k), S(BPF_RET | BPF_A, 0)});
  };
  EXPECT_EQ(alu(7, BPF_SUB, 9).verdict, 0xfffffffeu);
  EXPECT_EQ(alu(9, BPF_DIV, 2).verdict, 4u);
  EXPECT_EQ(alu(9, BPF_MOD, 4).verdict, 1u);
  EXPECT_EQ(alu(0xf0, BPF_AND, 0x3c).verdict, 0x30u);
  EXPECT_EQ(alu(0xf0, BPF_OR, 0x0f).verdict, 0xffu);
  EXPECT_EQ(alu(0xff, BPF_XOR, 0x0f).verdict, 0xf0u);
  EXPECT_EQ(alu(1, BPF_LSH, 4).verdict, 16u);
  EXPECT_EQ(alu(16, BPF_RSH, 4).verdict, 1u);
  EXPECT_EQ(alu(1, BPF_LSH, 40).verdict, 0u);  // no UB on oversized shifts
  EXPECT_EQ(alu(1, BPF_NEG, 0).verdict, 0xffffffffu);
  EXPECT_FALSE(alu(1, BPF_DIV, 0).ok());
  EXPECT_FALSE(alu(1, BPF_MOD, 0).ok());
  EXPECT_FALSE(alu(1, 0xf0, 0).ok());
}

TEST(BpfEmulator, ConditionalJumps) {
  // if nr <op> k return 1 else return 2
  auto jmp = [](uint16_t op, uint32_t k) {
    return R({S(BPF_LD | BPF_W | BPF_ABS, kNr), J(BPF_JMP | op | BPF_K, k, 0, 1), S(BPF_RET | BPF_K, 1),
              S(BPF_RET | BPF_K, 2)})
        .verdict;
  };
  EXPECT_EQ(jmp(BPF_JEQ, 42), 1u);
  EXPECT_EQ(jmp(BPF_JEQ, 41), 2u);
  EXPECT_EQ(jmp(BPF_JGT, 41), 1u);
  EXPECT_EQ(jmp(BPF_JGT, 42), 2u);
  EXPECT_EQ(jmp(BPF_JGE, 42), 1u);
  EXPECT_EQ(jmp(BPF_JGE, 43), 2u);
  EXPECT_EQ(jmp(BPF_JSET, 2), 1u);
  EXPECT_EQ(jmp(BPF_JSET, 1), 2u);
  // Against X.
  EXPECT_EQ(R({S(BPF_LDX | BPF_IMM, 42), S(BPF_LD | BPF_W | BPF_ABS, kNr),
               J(BPF_JMP | BPF_JEQ | BPF_X, 0, 1, 0), S(BPF_RET | BPF_K, 2), S(BPF_RET | BPF_K, 1)})
                .verdict,
            1u);
  // Unconditional.
  EXPECT_EQ(R({S(BPF_JMP | BPF_JA, 1), S(BPF_RET | BPF_K, 2), S(BPF_RET | BPF_K, 3)}).verdict, 3u);
}

TEST(BpfEmulator, MalformedControlFlowIsAnError) {
  EXPECT_FALSE(R({}).ok());
  EXPECT_FALSE(R({S(BPF_LD | BPF_IMM, 1)}).ok());  // falls off the end
  EXPECT_FALSE(R({S(BPF_JMP | BPF_JA, 1), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_JMP | BPF_JA, 0xffffffff), S(BPF_RET | BPF_K, 0)}).ok());
  // A jump whose untaken side is out of range is rejected even if not taken.
  EXPECT_FALSE(R({J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 5), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({J(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({J(BPF_JMP | 0xf0 | BPF_K, 0, 0, 0), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_RET | BPF_X, 0)}).ok());
  EXPECT_FALSE(R({S(BPF_MISC | 0x40, 0), S(BPF_RET | BPF_K, 0)}).ok());
  EXPECT_FALSE(bpf::Run(std::vector<sock_filter>(BPF_MAXINSNS + 1, S(BPF_RET | BPF_K, 0)), kData).ok());
  EXPECT_TRUE(bpf::Run(std::vector<sock_filter>(BPF_MAXINSNS, S(BPF_RET | BPF_K, 0)), kData).ok());
}

}  // namespace
}  // namespace skiff::bpf
