/**
 * The ID server could not listen where it was told: a taken port, an
 * address no interface has, a host name that does not resolve. A mistake
 * in the command line (exit code 2), said in one line naming the option to
 * change, instead of a system error's stack.
 */
export class ListenError extends Error {
  readonly host: string;
  readonly port: number;
  /** The system's code: EADDRINUSE, EADDRNOTAVAIL, ENOTFOUND, EACCES, … */
  readonly reason: string;

  constructor(host: string, port: number, cause: NodeJS.ErrnoException) {
    const reason = cause.code ?? "unknown";
    const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    super(`cannot listen on ${where}: ${advice(reason, cause)}`, { cause });
    this.host = host;
    this.port = port;
    this.reason = reason;
  }

  override get name(): string {
    return "ListenError";
  }
}

function advice(reason: string, cause: Error): string {
  switch (reason) {
    case "EADDRINUSE":
      return "address in use; choose another --port";
    case "EACCES":
      return "permission denied (ports below 1024 need privileges); choose another --port";
    case "EADDRNOTAVAIL":
      return "no interface of this machine has that address; choose another --host";
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_FAIL":
      return `the host name does not resolve (${reason}); choose another --host`;
    case "EAFNOSUPPORT":
      return "this machine does not support that address family; choose another --host";
    default:
      return `${cause.message}; check --host and --port`;
  }
}
