-- wrk script for bench/rest_predict.sh: the TF Serving REST predict request of the demo model.
wrk.method = "POST"
wrk.body   = '{"instances": [1.0, 2.0, 5.0]}'
wrk.headers["Content-Type"] = "application/json"
