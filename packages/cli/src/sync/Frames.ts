/** The chunk frame format lives in @grove/core, shared with the server. */
export * from "@grove/core/objects/Frames"
