/** A value that cannot be canonicalized without losing information. */
export declare class CanonicalError extends Error {}
/** The RFC 8785 canonical JSON text of value. */
export declare function canonicalize(value: unknown): string;
/** "sha256:<hex>" of the UTF-8 canonical JSON of value. */
export declare function sha256Digest(value: unknown): Promise<string>;
