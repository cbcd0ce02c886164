//! Arithmetic formulas over axis values (FLOP and byte counts, tuner constraints).

use evalexpr::{ContextWithMutableVariables, DefaultNumericTypes, HashMapContext, Node, Value};
use std::collections::BTreeMap;

/// Error building or evaluating a formula.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FormulaError {
    /// The text does not parse.
    #[error("cannot parse `{text}`: {message}")]
    Parse {
        /// The formula text.
        text: String,
        /// Parser message.
        message: String,
    },
    /// A variable is not an axis (or tunable).
    #[error("`{text}` uses unknown name `{name}`")]
    UnknownName {
        /// The formula text.
        text: String,
        /// The unknown identifier.
        name: String,
    },
    /// Evaluation failed (type error, division by zero...).
    #[error("cannot evaluate `{text}`: {message}")]
    Eval {
        /// The formula text.
        text: String,
        /// Evaluator message.
        message: String,
    },
}

/// A parsed expression such as `2 * M * N * K`.
#[derive(Debug, Clone)]
pub struct Formula {
    text: String,
    tree: Node<DefaultNumericTypes>,
}

impl Formula {
    /// Parses `text`, checking that every identifier is in `names`.
    pub fn parse(text: &str, names: &[&str]) -> Result<Formula, FormulaError> {
        let tree = evalexpr::build_operator_tree::<DefaultNumericTypes>(text).map_err(|e| {
            FormulaError::Parse {
                text: text.to_string(),
                message: e.to_string(),
            }
        })?;
        if let Some(bad) = tree
            .iter_variable_identifiers()
            .find(|v| !names.contains(v))
        {
            return Err(FormulaError::UnknownName {
                text: text.to_string(),
                name: bad.to_string(),
            });
        }
        Ok(Formula {
            text: text.to_string(),
            tree,
        })
    }

    /// Parses a constraint: `parse`, then one trial evaluation with every name at 64, which
    /// must give a boolean (evalexpr builds a tree for `BM <= <= N` that only fails when
    /// evaluated). Arithmetic errors of the trial values (a division by zero) are not the
    /// constraint's fault and pass.
    pub fn parse_constraint(text: &str, names: &[&str]) -> Result<Formula, FormulaError> {
        use evalexpr::EvalexprError as E;
        let f = Formula::parse(text, names)?;
        let trial: BTreeMap<String, i64> = names.iter().map(|n| (n.to_string(), 64)).collect();
        match f
            .tree
            .eval_boolean_with_context(&Self::context(&trial, false))
        {
            Ok(_)
            | Err(E::DivisionError { .. })
            | Err(E::ModulationError { .. })
            | Err(E::AdditionError { .. })
            | Err(E::SubtractionError { .. })
            | Err(E::MultiplicationError { .. }) => Ok(f),
            Err(e) => Err(FormulaError::Parse {
                text: text.to_string(),
                message: format!("not a true/false condition ({e})"),
            }),
        }
    }

    /// The source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn context(
        values: &BTreeMap<String, i64>,
        as_float: bool,
    ) -> HashMapContext<DefaultNumericTypes> {
        let mut ctx = HashMapContext::<DefaultNumericTypes>::new();
        for (k, v) in values {
            let value = if as_float {
                Value::Float(*v as f64)
            } else {
                Value::Int(*v)
            };
            // Setting a fresh identifier in a HashMapContext cannot fail.
            let _ = ctx.set_value(k.clone(), value);
        }
        ctx
    }

    /// Evaluates as a real number (axis values become floats, so `/` does not truncate).
    pub fn eval_f64(&self, values: &BTreeMap<String, i64>) -> Result<f64, FormulaError> {
        self.tree
            .eval_number_with_context(&Self::context(values, true))
            .map_err(|e| FormulaError::Eval {
                text: self.text.clone(),
                message: e.to_string(),
            })
    }

    /// Evaluates as a boolean constraint with integer semantics (`N % BN == 0`).
    pub fn eval_bool(&self, values: &BTreeMap<String, i64>) -> Result<bool, FormulaError> {
        self.tree
            .eval_boolean_with_context(&Self::context(values, false))
            .map_err(|e| FormulaError::Eval {
                text: self.text.clone(),
                message: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn evaluates_flops_without_integer_truncation() {
        let f = Formula::parse("5 * M * N / 2", &["M", "N"]).unwrap();
        assert_eq!(f.eval_f64(&axes(&[("M", 3), ("N", 3)])).unwrap(), 22.5);
    }

    #[test]
    fn rejects_unknown_names_and_bad_syntax() {
        assert!(
            matches!(Formula::parse("2 * M * Q", &["M"]), Err(FormulaError::UnknownName { name, .. }) if name == "Q")
        );
        assert!(matches!(
            Formula::parse("2 * (M", &["M"]),
            Err(FormulaError::Parse { .. })
        ));
    }

    #[test]
    fn constraints_use_integer_semantics() {
        let f = Formula::parse("N % BN == 0 && BN <= 64", &["N", "BN"]).unwrap();
        assert!(f.eval_bool(&axes(&[("N", 128), ("BN", 64)])).unwrap());
        assert!(!f.eval_bool(&axes(&[("N", 100), ("BN", 64)])).unwrap());
    }
}
