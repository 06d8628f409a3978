export * as DbEmbedded from "./DbEmbedded.ts"
export * as DbPostgres from "./DbPostgres.ts"
export * as Migrations from "./Migrations.ts"
