"""The TensorFlow backend: `tensorflow:eager` (TF2 eager), `tensorflow:static` (a
`tf.compat.v1.Graph` run by a Session) and `tensorflow:function` (a `tf.function`)."""
