//! UnicodeScripts: split where the Unicode script changes. (not implemented yet)

use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::text::PreTokenizedString;

pub struct UnicodeScripts;

impl UnicodeScripts {
    pub fn new() -> Result<Self> {
        Err(Error::unsupported("pre-tokenizer `UnicodeScripts` is not supported yet"))
    }
}

impl PreTokenizer for UnicodeScripts {
    fn pre_tokenize(&self, _pts: &mut PreTokenizedString) -> Result<()> {
        Err(Error::unsupported("pre-tokenizer `UnicodeScripts` is not supported yet"))
    }
}
