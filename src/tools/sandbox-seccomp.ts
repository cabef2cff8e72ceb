/**
 * The seccomp filter every confined command runs under, as the classic BPF program bubblewrap's
 * `--seccomp FD` installs. It refuses what the sandbox's mounts and namespaces cannot take away:
 *
 * - every socket but IPv4, IPv6 and netlink, AF_UNIX above all: a service listening on a socket
 *   file anywhere on the read-only filesystem (a database, a container engine, an editor's server,
 *   D-Bus) would act for the command outside the sandbox, and families the network namespace does not
 *   confine (AF_VSOCK reaches the host of a virtual machine) must not be opened at all. A
 *   `socketpair(AF_UNIX, …)` is allowed as a stream only: an unconnected datagram pair can still
 *   `connect` or `sendto` a socket file; a stream pair reaches nothing (programs use it for pipes).
 * - modes with the set-user-ID or set-group-ID bit (chmod, and the calls that create files and
 *   folders): when DuckLM runs as root, a file a command made is root's, and a setuid copy of a shell
 *   in the workspace would make root of whoever runs it later;
 * - io_uring, whose operations (sockets among them) bypass this filter; openat2, whose arguments it
 *   cannot read;
 * - the kernel keyrings, bpf, perf events and userfaultfd, which a command never needs and which
 *   check a uid rather than a capability, or widen the kernel's surface.
 *
 * Any other architecture's calls (32-bit, x32) kill the process: their numbers differ, and a filter
 * keyed on one table would let the other through.
 */

/** A syscall table: the audit architecture and the numbers this filter cares about. */
interface SyscallTable {
  audit: number;
  socket: number;
  socketpair: number;
  /** Calls whose argument at the given index is a file mode: refused when it sets S_ISUID or S_ISGID. */
  modes: ReadonlyArray<readonly [number, 1 | 2 | 3]>;
  /** Refused with EPERM whatever their arguments. */
  refused: readonly number[];
  /** x86-64's x32 calls share its audit architecture and set this bit in the number. */
  x32Bit?: number;
}

const TABLES: Partial<Record<NodeJS.Architecture, SyscallTable>> = {
  x64: {
    audit: 0xc000003e,
    socket: 41,
    socketpair: 53,
    // chmod, fchmod, fchmodat, fchmodat2, open, openat, creat, mkdir, mkdirat, mknod, mknodat.
    modes: [[90, 1], [91, 1], [268, 2], [452, 2], [2, 2], [257, 3], [85, 1], [83, 1], [258, 2], [133, 1], [259, 2]],
    // io_uring_setup/enter/register, keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd, openat2.
    refused: [425, 426, 427, 250, 248, 249, 321, 298, 323, 437],
    x32Bit: 0x40000000,
  },
  arm64: {
    audit: 0xc00000b7,
    socket: 198,
    socketpair: 199,
    // fchmod, fchmodat, fchmodat2, openat, mkdirat, mknodat.
    modes: [[52, 1], [53, 2], [452, 2], [56, 3], [34, 2], [33, 2]],
    refused: [425, 426, 427, 219, 217, 218, 280, 241, 282, 437],
  },
};

const AF_UNIX = 1;
/** The families a command may open: the network namespace confines these. */
const AF_INET = 2;
const AF_INET6 = 10;
const AF_NETLINK = 16;
const SOCK_STREAM = 1;
/** The socket type without SOCK_NONBLOCK and SOCK_CLOEXEC. */
const SOCK_TYPE_MASK = 0xf;
const SETUID_OR_SETGID = 0o6000;
const EPERM = 1;

// Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
const LOAD_WORD = 0x20; // BPF_LD | BPF_W | BPF_ABS
const AND = 0x54; // BPF_ALU | BPF_AND | BPF_K
const JUMP_IF_EQUAL = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JUMP_IF_AT_LEAST = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JUMP_IF_ANY_BIT = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RETURN = 0x06; // BPF_RET | BPF_K
const RET_ALLOW = 0x7fff0000;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;

// Offsets in struct seccomp_data: the call's number, its architecture, and the low half of argument
// N at 16 + 8N (both architectures are little-endian).
const NUMBER_AT = 0;
const ARCH_AT = 4;
const argumentAt = (index: number) => 16 + 8 * index;

type Jump = { op: typeof JUMP_IF_EQUAL | typeof JUMP_IF_AT_LEAST | typeof JUMP_IF_ANY_BIT; value: number; then: string | null; otherwise: string | null };
type Instruction = { label?: string } & ({ op: typeof LOAD_WORD; at: number } | { op: typeof AND; value: number } | Jump | { op: typeof RETURN; value: number });

/** Whether this machine's architecture has a filter (without one, commands cannot be confined). */
export function seccompSupported(arch: NodeJS.Architecture = process.arch): boolean {
  return TABLES[arch] !== undefined;
}

/** The filter for `arch`, as the bytes of a `struct sock_filter` array. */
export function confinedCommandFilter(arch: NodeJS.Architecture = process.arch): Buffer {
  const table = TABLES[arch];
  if (!table) throw new Error(`no seccomp filter for the ${arch} architecture`);
  const jumpIf = (value: number, then: string): Jump => ({ op: JUMP_IF_EQUAL, value, then, otherwise: null });
  const modeIndexes = [...new Set(table.modes.map(([, index]) => index))];
  const program: Instruction[] = [
    { op: LOAD_WORD, at: ARCH_AT },
    { op: JUMP_IF_EQUAL, value: table.audit, then: null, otherwise: "kill" },
    { op: LOAD_WORD, at: NUMBER_AT },
    ...(table.x32Bit ? [{ op: JUMP_IF_AT_LEAST, value: table.x32Bit, then: "kill", otherwise: null } as const] : []),
    jumpIf(table.socket, "socket"),
    jumpIf(table.socketpair, "socketpair"),
    ...table.modes.map(([number, index]) => jumpIf(number, `mode-${index}`)),
    ...table.refused.map((number) => jumpIf(number, "refuse")),
    { op: RETURN, value: RET_ALLOW },
    { label: "socket", op: LOAD_WORD, at: argumentAt(0) },
    { op: JUMP_IF_EQUAL, value: AF_INET, then: "allow", otherwise: null },
    { op: JUMP_IF_EQUAL, value: AF_INET6, then: "allow", otherwise: null },
    { op: JUMP_IF_EQUAL, value: AF_NETLINK, then: "allow", otherwise: "refuse" },
    { label: "socketpair", op: LOAD_WORD, at: argumentAt(0) },
    { op: JUMP_IF_EQUAL, value: AF_UNIX, then: null, otherwise: "refuse" },
    { op: LOAD_WORD, at: argumentAt(1) },
    { op: AND, value: SOCK_TYPE_MASK },
    { op: JUMP_IF_EQUAL, value: SOCK_STREAM, then: "allow", otherwise: "refuse" },
    ...modeIndexes.flatMap((index): Instruction[] => [
      { label: `mode-${index}`, op: LOAD_WORD, at: argumentAt(index) },
      { op: JUMP_IF_ANY_BIT, value: SETUID_OR_SETGID, then: "refuse", otherwise: "allow" },
    ]),
    { label: "allow", op: RETURN, value: RET_ALLOW },
    { label: "refuse", op: RETURN, value: (RET_ERRNO | EPERM) >>> 0 },
    { label: "kill", op: RETURN, value: RET_KILL_PROCESS },
  ];
  const labels = new Map<string, number>();
  program.forEach((instruction, index) => {
    if (instruction.label) labels.set(instruction.label, index);
  });
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach((instruction, index) => {
    const offset = index * 8;
    // Classic BPF jumps only forward, by at most 255 instructions.
    const jump = (label: string | null) => {
      if (label === null) return 0;
      const distance = labels.get(label)! - index - 1;
      if (distance < 0 || distance > 255) throw new Error(`seccomp jump to ${label} out of range`);
      return distance;
    };
    const conditional = instruction.op === JUMP_IF_EQUAL || instruction.op === JUMP_IF_AT_LEAST || instruction.op === JUMP_IF_ANY_BIT;
    bytes.writeUInt16LE(instruction.op, offset);
    bytes.writeUInt8(conditional ? jump(instruction.then) : 0, offset + 2);
    bytes.writeUInt8(conditional ? jump(instruction.otherwise) : 0, offset + 3);
    bytes.writeUInt32LE((instruction.op === LOAD_WORD ? instruction.at : instruction.value) >>> 0, offset + 4);
  });
  return bytes;
}
