//! Reading the fields of a tokenizer.json component object with the reference's serde rules:
//! unknown fields are ignored, a plain field must be present with the right JSON type, an
//! `Option` field may be missing or null. Errors name the component and the field.

use crate::error::{Error, Result};
use serde_json::{Map, Value};

pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    what: &'a str,
}

impl<'a> Obj<'a> {
    /// `what` names the component in error messages, e.g. "normalizer `Strip`".
    pub(crate) fn new(v: &'a Value, what: &'a str) -> Result<Self> {
        match v.as_object() {
            Some(map) => Ok(Obj { map, what }),
            None => Err(Error::invalid(format!("{what}: expected a JSON object"))),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name)
    }

    fn missing(&self, name: &str) -> Error {
        Error::invalid(format!("{}: missing field `{name}`", self.what))
    }

    pub(crate) fn bad(&self, name: &str, expected: &str) -> Error {
        Error::invalid(format!("{}: field `{name}` must be {expected}", self.what))
    }

    pub(crate) fn req(&self, name: &str) -> Result<&'a Value> {
        self.map.get(name).ok_or_else(|| self.missing(name))
    }

    pub(crate) fn req_bool(&self, name: &str) -> Result<bool> {
        self.req(name)?
            .as_bool()
            .ok_or_else(|| self.bad(name, "a boolean"))
    }

    pub(crate) fn opt_bool(&self, name: &str) -> Result<Option<bool>> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.bad(name, "a boolean")),
        }
    }

    pub(crate) fn req_str(&self, name: &str) -> Result<&'a str> {
        self.req(name)?
            .as_str()
            .ok_or_else(|| self.bad(name, "a string"))
    }

    /// A string of exactly one character (serde's `char`).
    pub(crate) fn req_char(&self, name: &str) -> Result<char> {
        let s = self.req_str(name)?;
        let mut it = s.chars();
        match (it.next(), it.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(self.bad(name, "a single character")),
        }
    }

    pub(crate) fn req_array(&self, name: &str) -> Result<&'a Vec<Value>> {
        self.req(name)?
            .as_array()
            .ok_or_else(|| self.bad(name, "an array"))
    }

    /// An externally tagged `{"String": s}` / `{"Regex": s}` pattern: `(is_regex, s)`.
    pub(crate) fn req_pattern(&self, name: &str) -> Result<(bool, &'a str)> {
        let v = self.req(name)?;
        let expected = "an object {\"String\": ...} or {\"Regex\": ...}";
        let m = v.as_object().ok_or_else(|| self.bad(name, expected))?;
        if m.len() != 1 {
            return Err(self.bad(name, expected));
        }
        let (k, s) = m.iter().next().ok_or_else(|| self.bad(name, expected))?;
        let s = s
            .as_str()
            .ok_or_else(|| self.bad(&format!("{name}.{k}"), "a string"))?;
        match k.as_str() {
            "String" => Ok((false, s)),
            "Regex" => Ok((true, s)),
            _ => Err(self.bad(name, expected)),
        }
    }

    pub(crate) fn opt_behavior(&self, name: &str) -> Result<Option<crate::text::SplitBehavior>> {
        match self.map.get(name) {
            None => Ok(None),
            Some(v) => {
                let s = v
                    .as_str()
                    .ok_or_else(|| self.bad(name, "a split behavior name"))?;
                crate::text::SplitBehavior::from_name(s)
                    .map(Some)
                    .map_err(|e| e.context(format!("{}: field `{name}`", self.what)))
            }
        }
    }
}
