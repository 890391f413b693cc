/**
 * The ID server's error answers: an HTTP status, a stable code and a
 * sentence saying what was wrong and what is allowed, sent as JSON,
 * `{"error": {"code": "…", "message": "…"}}`.
 */

/** The JSON error body: a stable code and a sentence saying what was wrong and what is allowed. */
export interface ErrorBody {
  readonly code: string;
  readonly message: string;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Every error's JSON body, `{"error": {"code", "message"}}`. */
export function errorBodyOf(error: HttpError): { error: ErrorBody } {
  return { error: { code: error.code, message: error.message } };
}
