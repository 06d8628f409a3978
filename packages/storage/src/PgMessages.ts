/**
 * The largest protocol message the database client accepts. The client's default (16 MiB) refused a
 * single row past it: the commit that adds 100,000 files lists them all (~19 MB of `files`), and every
 * later push to that repository failed reading it. PostgreSQL caps a field at 1 GB; so does this.
 */
export const MAX_MESSAGE_SIZE = 1024 * 1024 * 1024
