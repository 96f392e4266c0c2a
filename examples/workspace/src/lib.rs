/// Adds one.
pub fn add_one(x: u32) -> u32 {
    x + 1
}
